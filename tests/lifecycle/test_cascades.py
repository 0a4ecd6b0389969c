"""Cascades (SPEC §8): deleting what memories depend on hides them at once, a task started on
commit erases them with a receipt, and the cascade sweep catches whatever that task missed."""

from __future__ import annotations

from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from governance import actions as governance
from governance.models import Collection, Document, Member, Workspace
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion, RateLimitSlot
from retention import lifecycle, tasks
from retention.models import DeletionReceipt, Operation
from tests.support import client_for, make_agent


@pytest.fixture
def knowledge(world):
    collection = governance.create_collection(world.workspace, name="Handbook")
    document = governance.create_document(
        collection, title="Deploys", text="Deploys happen on Tuesdays.\n\nRollbacks need two approvals."
    )
    other = governance.create_document(collection, title="Holidays", text="The office closes in August.")
    return collection, document, other


def remember(agent, text: str, **body) -> int:
    response = agent.remember(namespace="ops", text=text, **body)
    assert response.status_code == 201, response.content
    return int(response.json()["memory"]["id"])


def listed(agent) -> list[int]:
    return [int(m["id"]) for m in agent.list().json()["memories"]]


def gone(*ids: int) -> bool:
    return (
        not MemoryVersion.objects.filter(pk__in=ids).exists()
        and not Citation.objects.filter(memory_id__in=ids).exists()
        and not MemoryEmbedding.objects.filter(memory_id__in=ids).exists()
    )


def test_deleting_a_cited_document_hides_its_memories_at_once_and_erases_them_on_commit(
    world, agent, knowledge, django_capture_on_commit_callbacks
):
    _, document, other = knowledge
    cites = remember(agent, "Deploys are on Tuesdays.", citations=[str(document.passages.first().pk)])
    unrelated = remember(agent, "The office closes in August.", citations=[str(other.passages.first().pk)])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        governance.delete_document(document, actor=world.owner.user)
    assert listed(agent) == [unrelated]  # hidden before the erase runs
    assert MemoryVersion.objects.get(pk=cites).unreachable_reason == Operation.CASCADE_DOCUMENT
    for callback in callbacks:
        callback()
    assert gone(cites)
    receipt = DeletionReceipt.objects.get()
    assert (receipt.operation, receipt.member_ref, receipt.memory_version_ids) == (
        Operation.CASCADE_DOCUMENT,
        world.editor.pk,
        [cites],
    )
    assert receipt.manifest["artifacts"] == {
        "memory_version": 1,
        "citation": 1,
        "memory_embedding": 1,
        "access_log_entry": 0,
        "access_log_reference": 0,
        "data_key": 1,
    }
    assert listed(agent) == [unrelated]


def test_deleting_a_document_through_the_api_erases_every_version_that_cites_it(
    world, agent, knowledge, django_capture_on_commit_callbacks
):
    _, document, _ = knowledge
    passage = str(document.passages.first().pk)
    v1 = remember(agent, "Deploy rule one.", key="deploys", citations=[passage])
    v2 = remember(agent, "Deploy rule two.", key="deploys", citations=[passage])
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/documents/{document.pk}")
    assert response.status_code in (200, 204), response.content
    assert gone(v1, v2)
    assert sorted(DeletionReceipt.objects.get(operation=Operation.CASCADE_DOCUMENT).memory_version_ids) == sorted(
        [v1, v2]
    )


def test_deleting_a_collection_erases_memories_filed_in_it_or_citing_its_documents(
    world, agent, knowledge, django_capture_on_commit_callbacks
):
    collection, document, _ = knowledge
    filed = remember(agent, "Filed in the handbook.", collectionId=str(collection.pk))
    cites = remember(agent, "Cites the handbook.", citations=[str(document.passages.first().pk)])
    elsewhere = remember(agent, "Not about the handbook.")
    with django_capture_on_commit_callbacks(execute=True):
        governance.delete_collection(collection, actor=world.owner.user)
    assert gone(filed, cites)
    assert listed(agent) == [elsewhere]
    receipt = DeletionReceipt.objects.get()
    assert receipt.operation == Operation.CASCADE_COLLECTION
    assert sorted(receipt.memory_version_ids) == sorted([filed, cites])


def test_removing_a_member_erases_their_memories_and_only_theirs(world, agent, django_capture_on_commit_callbacks):
    owner_agent = make_agent(world.owner)
    editors = [remember(agent, "Editor note one."), remember(agent, "Editor note two.")]
    owners = remember(owner_agent, "Owner note.")
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/members/{world.editor.pk}")
    assert response.status_code in (200, 204), response.content
    assert gone(*editors)
    assert MemoryVersion.objects.filter(pk=owners).exists()
    receipt = DeletionReceipt.objects.get()
    assert (receipt.operation, receipt.member_ref) == (Operation.MEMBER_REMOVAL, world.editor.pk)


def test_switching_a_workspace_to_non_retaining_erases_all_its_memories(
    world, agent, django_capture_on_commit_callbacks
):
    owner_agent = make_agent(world.owner)
    outsider_agent = make_agent(world.outsider)
    ids = [remember(agent, "Editor note."), remember(owner_agent, "Owner note.")]
    kept = remember(outsider_agent, "Another workspace.")
    with django_capture_on_commit_callbacks(execute=True):
        governance.set_retains_history(world.workspace, False, actor=None, reason="test")
    assert gone(*ids)
    assert MemoryVersion.objects.filter(pk=kept).exists()
    receipts = DeletionReceipt.objects.filter(operation=Operation.NON_RETAINING)
    assert sorted(receipts.values_list("member_ref", flat=True)) == sorted([world.editor.pk, world.owner.pk])


def test_deleting_a_workspace_erases_its_memories_with_receipts_that_outlive_it(world, agent):
    ids = [remember(agent, "Editor note."), remember(make_agent(world.owner), "Owner note.")]
    workspace_id = world.workspace.pk
    assert governance.delete_workspace(world.workspace, actor=None, reason="test") == 2
    assert not Workspace.objects.filter(pk=workspace_id).exists()
    assert gone(*ids)
    receipts = DeletionReceipt.objects.filter(operation=Operation.WORKSPACE_DELETION, workspace_ref=workspace_id)
    assert sorted(i for r in receipts for i in r.memory_version_ids) == sorted(ids)


def test_when_the_broker_is_down_the_cascade_sweep_erases_what_the_task_missed(
    world, agent, knowledge, django_capture_on_commit_callbacks
):
    _, document, _ = knowledge
    cites = remember(agent, "Deploys are on Tuesdays.", citations=[str(document.passages.first().pk)])
    with (
        mock.patch.object(tasks.erase_unreachable_task, "delay", side_effect=ConnectionError("broker down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        governance.delete_document(document, actor=world.owner.user)
    assert listed(agent) == []
    assert MemoryVersion.objects.filter(pk=cites).exists()
    result = lifecycle.cascade_sweep()
    assert result["versionsErased"] == 1
    assert gone(cites)
    assert DeletionReceipt.objects.get().operation == Operation.CASCADE_DOCUMENT
    assert lifecycle.cascade_sweep()["versionsErased"] == 0


def test_the_cascade_sweep_finds_orphans_that_were_never_marked(world, agent, knowledge):
    collection, document, _ = knowledge
    owner_agent = make_agent(world.owner)
    cites = remember(
        agent, "Cites a document deleted behind the actions' back.", citations=[str(document.passages.first().pk)]
    )
    other_collection = governance.create_collection(world.workspace, name="Scratch")
    filed = remember(
        owner_agent, "Filed in a collection deleted behind the actions' back.", collectionId=str(other_collection.pk)
    )
    viewer_memory = MemoryVersion.objects.create(
        workspace=world.workspace, member=world.viewer, namespace="ops", text="Viewer note."
    )
    outsider_memory = remember(make_agent(world.outsider), "Outsider note.")

    Document.objects.filter(pk=document.pk).delete()  # a deletion that bypassed the actions
    Collection.objects.filter(pk=other_collection.pk).delete()
    Member.objects.filter(pk=world.viewer.pk).update(left_at=timezone.now())
    Workspace.objects.filter(pk=world.other_workspace.pk).update(retains_history=False)

    result = lifecycle.cascade_sweep()
    assert result["marked"] == {"cascade_document": 1, "cascade_collection": 1, "member_removal": 1, "non_retaining": 1}
    assert result["versionsErased"] == 4
    assert gone(cites, filed, viewer_memory.pk, outsider_memory)
    by_operation = dict(DeletionReceipt.objects.values_list("operation", "memory_version_ids"))
    assert by_operation == {
        Operation.CASCADE_DOCUMENT: [cites],
        Operation.CASCADE_COLLECTION: [filed],
        Operation.MEMBER_REMOVAL: [viewer_memory.pk],
        Operation.NON_RETAINING: [outsider_memory],
    }
    assert lifecycle.cascade_sweep()["versionsErased"] == 0


def test_a_new_document_version_does_not_cascade(world, agent, knowledge):
    _, document, _ = knowledge
    cites = remember(agent, "Deploys are on Tuesdays.", citations=[str(document.passages.first().pk)])
    governance.add_document_version(document, text="Deploys happen on Wednesdays now.")
    lifecycle.cascade_sweep()
    assert MemoryVersion.objects.filter(pk=cites).exists()
    assert agent.list().json()["memories"][0]["sourceState"] == "changed"


def test_the_cascade_sweep_drops_rate_limit_rows_older_than_an_hour(world):
    now = timezone.now()
    RateLimitSlot.objects.create(credential_id=1, at=now - timedelta(hours=2))
    recent = RateLimitSlot.objects.create(credential_id=1, at=now - timedelta(minutes=30))
    assert lifecycle.cascade_sweep()["rateLimitCountersPurged"] == 1
    assert list(RateLimitSlot.objects.values_list("pk", flat=True)) == [recent.pk]
