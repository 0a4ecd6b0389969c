"""Deletion receipts (SPEC §8) are complete for every erase path and hold no memory content;
the receipts endpoint shows the owner every receipt (counts) and a member their own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from governance import actions as governance
from retention import lifecycle
from retention.models import DeletionReceipt, Operation
from tests.support import client_for, error_code, make_agent

SECRET_TEXT = "Zebra-striped umbrella stored under desk seven"


def remember(agent, text: str = SECRET_TEXT, **body) -> str:
    response = agent.remember(namespace=body.pop("namespace", "notes"), text=text, **body)
    assert response.status_code == 201, response.content
    return response.json()["memory"]["id"]


def assert_complete(receipt: DeletionReceipt, operation: str, *, versions: int, backup_days: int = 14) -> None:
    assert receipt.operation == operation
    assert receipt.actor_label
    artifacts = receipt.manifest["artifacts"]
    assert set(artifacts) == {
        "memory_version",
        "citation",
        "memory_embedding",
        "access_log_entry",
        "access_log_reference",
        "data_key",
    }
    assert artifacts["memory_version"] == versions == len(receipt.memory_version_ids)
    assert artifacts["memory_embedding"] == versions
    # SPEC §8.2: one data key per version, destroyed with it, and the receipt names them.
    assert artifacts["data_key"] == receipt.manifest["keysDestroyed"] == versions == len(receipt.manifest["dataKeyIds"])
    assert isinstance(receipt.manifest["filters"], dict) and receipt.manifest["filters"]
    assert receipt.unreachable_at <= receipt.purged_at
    assert receipt.requested_at <= receipt.purged_at
    backups = receipt.residual["backups"]
    assert backups["retentionDays"] == backup_days
    assert backups["until"] == (receipt.purged_at + timedelta(days=backup_days)).isoformat()
    assert receipt.verification["clean"] is True
    assert receipt.verification["remaining"] == {
        "memory_version": 0,
        "citation": 0,
        "memory_embedding": 0,
        "access_log_entry": 0,
        "data_key": 0,
    }
    assert backups["content"] == "sealed" and "ciphertext only" in backups["statement"]
    assert receipt.residual["keyring"]["retentionDays"] == 0 and receipt.residual["keyring"]["until"] is None
    everything = json.dumps(
        [receipt.manifest, receipt.residual, receipt.verification, receipt.actor_label, receipt.memory_version_ids]
    )
    assert "Zebra" not in everything and "umbrella" not in everything


@pytest.fixture(autouse=True)
def backups(settings):
    settings.BACKUP_RETENTION_DAYS = 14


def test_forget_writes_a_complete_receipt(world, agent):
    memory_id = remember(agent, key="umbrella")
    remember(agent, SECRET_TEXT + " again", key="umbrella")
    response = agent.forget(memoryId=memory_id)
    assert response.status_code == 200
    receipt = DeletionReceipt.objects.get(pk=response.json()["receiptId"])
    assert_complete(receipt, Operation.FORGET, versions=2)
    assert receipt.member_ref == world.editor.pk


def test_member_deletes_write_complete_receipts(world, agent):
    one = remember(agent)
    remember(agent, "Another note about lunch.")
    client = client_for(world.editor)
    response = client.delete(f"/api/w/{world.workspace.pk}/ask-history/agent-memories/{one}")
    assert_complete(DeletionReceipt.objects.get(pk=response.json()["receiptId"]), Operation.MEMBER_DELETE, versions=1)
    response = client.delete(f"/api/w/{world.workspace.pk}/ask-history/agent-memories")
    assert_complete(DeletionReceipt.objects.get(pk=response.json()["receiptId"]), Operation.MEMBER_DELETE, versions=1)
    created = client.post(
        f"/api/w/{world.workspace.pk}/ai-memory/memories",
        {"kind": "fact", "topic": "desk_location", "summary": SECRET_TEXT},
        format="json",
    )
    response = client.delete(f"/api/w/{world.workspace.pk}/ai-memory/memories/{created.json()['memory']['id']}")
    assert_complete(DeletionReceipt.objects.get(pk=response.json()["receiptId"]), Operation.MEMBER_DELETE, versions=1)


def test_owner_bulk_delete_writes_a_complete_receipt(world, agent):
    remember(agent)
    remember(make_agent(world.owner), "Owner's own note.")
    response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories")
    assert response.status_code == 200
    body = response.json()
    assert body["deleted"]["memory_version"] == 2 and body["members"] == 2 and len(body["receiptIds"]) == 2
    receipts = DeletionReceipt.objects.filter(pk__in=body["receiptIds"])
    assert {r.member_ref for r in receipts} == {world.editor.pk, world.owner.pk}  # each member sees their own
    for receipt in receipts:
        assert_complete(receipt, Operation.OWNER_BULK_DELETE, versions=1)


def test_expiry_and_grace_purge_write_complete_receipts(world, agent):
    t0 = datetime(2031, 3, 1, tzinfo=UTC)
    with time_machine.travel(t0, tick=False):
        remember(agent)
        client_for(world.editor).post(
            f"/api/w/{world.workspace.pk}/ai-memory/memories",
            {"kind": "fact", "topic": "desk_location", "summary": SECRET_TEXT},
            format="json",
        )
    with time_machine.travel(t0 + timedelta(days=121), tick=False):
        lifecycle.expiry_sweep()
        lifecycle.grace_purge()
    assert_complete(DeletionReceipt.objects.get(operation=Operation.EXPIRY), Operation.EXPIRY, versions=1)
    assert_complete(DeletionReceipt.objects.get(operation=Operation.GRACE_PURGE), Operation.GRACE_PURGE, versions=1)


def test_cascades_member_removal_and_workspace_deletion_write_complete_receipts(
    world, agent, django_capture_on_commit_callbacks
):
    collection = governance.create_collection(world.workspace, name="Facilities")
    document = governance.create_document(collection, title="Desks", text="Desk seven is by the window.")
    other = governance.create_collection(world.workspace, name="Other")
    remember(agent, citations=[str(document.passages.first().pk)])
    remember(agent, "Filed note.", collectionId=str(other.pk))
    owner_agent = make_agent(world.owner)
    with django_capture_on_commit_callbacks(execute=True):
        governance.delete_document(document, actor=world.owner.user)
        governance.delete_collection(other, actor=world.owner.user)
    remember(agent, "Editor note before leaving.")
    with django_capture_on_commit_callbacks(execute=True):
        governance.remove_member(world.editor, actor=world.owner.user)
    remember(owner_agent, "Owner note.")
    governance.delete_workspace(world.workspace, actor=None, reason="test")
    receipt = DeletionReceipt.objects.get(operation=Operation.CASCADE_DOCUMENT)
    assert_complete(receipt, Operation.CASCADE_DOCUMENT, versions=1)
    assert receipt.manifest["artifacts"]["citation"] == 1
    assert_complete(
        DeletionReceipt.objects.get(operation=Operation.CASCADE_COLLECTION), Operation.CASCADE_COLLECTION, versions=1
    )
    assert_complete(
        DeletionReceipt.objects.get(operation=Operation.MEMBER_REMOVAL), Operation.MEMBER_REMOVAL, versions=1
    )
    assert_complete(
        DeletionReceipt.objects.get(operation=Operation.WORKSPACE_DELETION), Operation.WORKSPACE_DELETION, versions=1
    )


def test_no_backups_configured_is_stated_not_guessed(world, agent, settings):
    settings.BACKUP_RETENTION_DAYS = 0
    response = agent.forget(memoryId=remember(agent))
    residual = DeletionReceipt.objects.get(pk=response.json()["receiptId"]).residual["backups"]
    assert (
        residual["retentionDays"] == 0 and residual["until"] is None and "No database backups" in residual["statement"]
    )


# --- the endpoint ------------------------------------------------------------------------------
def receipts_url(world) -> str:
    return f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts"


@pytest.fixture
def three_receipts(world, agent):
    editor_receipt = agent.forget(memoryId=remember(agent)).json()["receiptId"]
    owner_agent = make_agent(world.owner)
    owner_receipt = owner_agent.forget(memoryId=remember(owner_agent, "Owner's note.")).json()["receiptId"]
    remember(agent, "Another editor note.")
    bulk_receipt = (
        client_for(world.owner)
        .delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories")
        .json()["receiptId"]
    )
    return editor_receipt, owner_receipt, bulk_receipt


def test_the_owner_sees_every_receipt_with_counts_and_no_one_elses_memory_ids(world, three_receipts):
    editor_receipt, owner_receipt, bulk_receipt = three_receipts
    response = client_for(world.owner).get(receipts_url(world))
    assert response.status_code == 200
    receipts = {r["id"]: r for r in response.json()["receipts"]}
    assert list(receipts) == [bulk_receipt, owner_receipt, editor_receipt]  # newest first
    assert "memoryVersionIds" not in receipts[editor_receipt]
    assert "memoryVersionIds" in receipts[owner_receipt]
    editor = receipts[editor_receipt]
    assert editor["operation"] == "forget" and editor["memberId"] == str(world.editor.pk)
    assert editor["manifest"]["artifacts"]["memory_version"] == 1
    assert {"requestedAt", "unreachableAt", "purgedAt", "residual", "verification", "actor"} <= set(editor)
    assert "Zebra" not in response.content.decode()


def test_a_member_sees_only_their_own_receipts(world, three_receipts):
    editor_receipt, _, bulk_receipt = three_receipts
    response = client_for(world.editor).get(receipts_url(world))
    # the owner's bulk delete erased the editor's remaining note: its receipt is the editor's too
    assert [r["id"] for r in response.json()["receipts"]] == [bulk_receipt, editor_receipt]
    assert all(r["memoryVersionIds"] for r in response.json()["receipts"])
    assert client_for(world.viewer).get(receipts_url(world)).json()["receipts"] == []


def test_an_outsider_or_anonymous_caller_sees_nothing(world, three_receipts):
    response = client_for(world.outsider).get(receipts_url(world))
    assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
    from rest_framework.test import APIClient

    assert APIClient().get(receipts_url(world)).status_code in (401, 403)


def test_receipts_page_and_filter_by_operation(world, three_receipts):
    client = client_for(world.owner)
    first = client.get(receipts_url(world), {"limit": 2}).json()
    assert len(first["receipts"]) == 2 and first["nextCursor"]
    second = client.get(receipts_url(world), {"limit": 2, "cursor": first["nextCursor"]}).json()
    assert len(second["receipts"]) == 1 and second["nextCursor"] is None
    bulk = client.get(receipts_url(world), {"operation": "owner_bulk_delete"}).json()["receipts"]
    assert [r["operation"] for r in bulk] == ["owner_bulk_delete"]
    assert client.get(receipts_url(world), {"operation": "nope"}).status_code == 400
    assert client.get(receipts_url(world), {"limit": "0"}).status_code == 400
