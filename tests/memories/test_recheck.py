"""The live re-check (SPEC §4.2): a memory is hidden when what it cites expired or became unreadable, and a citation
whose passage changed is marked changed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import actions
from governance import actions as gov_actions
from governance.models import Collection, Document
from memoryapp.models import Citation, MemoryVersion
from retention.models import DeletionReceipt
from tests.support import _texts, make_agent

pytestmark = pytest.mark.django_db


def test_a_memory_is_hidden_when_its_cited_document_expired_or_became_unreadable(world):
    agent = make_agent(world.editor)
    open_collection = gov_actions.create_collection(world.workspace, name="Open")
    expiring = gov_actions.create_document(open_collection, title="e", text="Expiring text.")
    closing = gov_actions.create_document(open_collection, title="c", text="Closing text.")
    kept = gov_actions.create_document(open_collection, title="k", text="Kept text.")
    for text, document in (("cites expiring", expiring), ("cites closing", closing), ("cites kept", kept)):
        assert (
            agent.remember(
                namespace="n", text=text, citations=[str(document.current_version.passages.first().pk)]
            ).status_code
            == 201
        )
    assert agent.remember(namespace="n", text="no citation").status_code == 201
    Document.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    restricted = gov_actions.create_collection(world.workspace, name="Board", restricted=True, readers=[world.owner])
    Document.objects.filter(pk=closing.pk).update(collection=restricted)
    listed = agent.list()
    assert _texts(listed) == ["no citation", "cites kept"] and listed.json()["hidden"] == 2
    recalled = agent.recall(query="cites text")
    assert set(_texts(recalled)) <= {"no citation", "cites kept"} and recalled.json()["hidden"] == 2
    Document.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() + timedelta(hours=1))  # not yet expired
    assert "cites expiring" in _texts(agent.list())


def test_a_memory_in_a_collection_the_member_can_no_longer_read_is_hidden(world):
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Team")
    assert agent.remember(namespace="n", text="team note", collectionId=str(collection.pk)).status_code == 201
    assert _texts(agent.list()) == ["team note"]
    Collection.objects.filter(pk=collection.pk).update(restricted=True)
    listed = agent.list()
    assert _texts(listed) == [] and listed.json()["hidden"] == 1


def test_a_newer_document_version_marks_only_that_citation_changed(world):
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Docs")
    moving = gov_actions.create_document(collection, title="m", text="Version one.")
    still = gov_actions.create_document(collection, title="s", text="Still here.")
    citations = [str(moving.current_version.passages.first().pk), str(still.current_version.passages.first().pk)]
    assert agent.remember(namespace="n", text="two sources", citations=citations).status_code == 201
    assert agent.remember(namespace="n", text="no sources").status_code == 201
    memories = {m["text"]: m for m in agent.list().json()["memories"]}
    assert memories["two sources"]["sourceState"] == "current" and memories["no sources"]["sourceState"] is None
    gov_actions.add_document_version(moving, text="Version two.")
    memory = {m["text"]: m for m in agent.list().json()["memories"]}["two sources"]
    assert memory["sourceState"] == "changed"
    assert [c["sourceState"] for c in memory["citations"]] == ["changed", "current"]  # in citation order


def test_a_passage_whose_text_changed_in_place_marks_the_memory_changed(agent, docs):
    from governance.models import Passage

    _, _, passages = docs
    cited, untouched = passages
    agent.remember(namespace="n", text="ships from Osaka", citations=[str(cited.pk), str(untouched.pk)])
    assert agent.list().json()["memories"][0]["sourceState"] == "current"
    # Same document version, same passage id, other text (an in-place correction).
    Passage.objects.filter(pk=cited.pk).update(text="Orders ship from Kobe.", sha256="f" * 64)
    memory = agent.list().json()["memories"][0]
    assert memory["sourceState"] == "changed"
    states = {c["passageId"]: c["sourceState"] for c in memory["citations"]}
    assert states == {str(cited.pk): "changed", str(untouched.pk): "current"}
    recalled = agent.recall(query="Osaka").json()["memories"][0]
    assert recalled["sourceState"] == "changed"


def test_citations_store_hashes_not_text(agent, docs):
    _, document, passages = docs
    response = agent.remember(namespace="n", text="ships from Osaka", citations=[str(passages[0].pk)])
    memory = response.json()["memory"]
    assert memory["citations"] == [
        {
            "passageId": str(passages[0].pk),
            "documentId": str(document.pk),
            "sha256": passages[0].sha256,
            "sourceState": "current",
        }
    ]
    assert memory["sourceState"] == "current"
    citation = Citation.objects.get()
    assert not hasattr(citation, "text")


def test_newer_document_version_marks_changed(agent, docs):
    _, document, passages = docs
    agent.remember(namespace="n", text="ships from Osaka", citations=[str(passages[0].pk)])
    actions.add_document_version(document, text="Orders ship from Kobe now.")
    listed = agent.list().json()
    assert listed["memories"][0]["sourceState"] == "changed"
    assert listed["memories"][0]["citations"][0]["sourceState"] == "changed"


@pytest.mark.parametrize(
    "cause", ["document_deleted", "document_expired", "collection_restricted", "collection_deleted"]
)
def test_unreachable_sources_hide_the_memory(agent, world, docs, cause, django_capture_on_commit_callbacks):
    collection, document, passages = docs
    agent.remember(namespace="n", text="cites the handbook", citations=[str(passages[0].pk)])
    agent.remember(namespace="n", text="plain note")
    if cause == "document_deleted":
        actions.delete_document(document, actor=world.owner.user)
    elif cause == "document_expired":
        document.expires_at = timezone.now() - timedelta(seconds=1)
        document.save()
    elif cause == "collection_restricted":
        collection.restricted = True
        collection.save()
        collection.readers.set([world.owner])
    else:
        actions.delete_collection(collection, actor=world.owner.user)
    listed = agent.list().json()
    assert [m["text"] for m in listed["memories"]] == ["plain note"]
    assert listed["hidden"] == (0 if cause.endswith("deleted") else 1)  # deleted: unreachable at once, then erased
    recalled = agent.recall(query="handbook note").json()
    assert [m["text"] for m in recalled["memories"]] == ["plain note"]


def test_deleting_a_cited_document_erases_the_memory_with_a_receipt(
    agent, world, docs, django_capture_on_commit_callbacks
):
    _, document, passages = docs
    agent.remember(namespace="n", text="cites the handbook", citations=[str(passages[0].pk)])
    with django_capture_on_commit_callbacks(execute=True):
        actions.delete_document(document, actor=world.owner.user)
    assert MemoryVersion.objects.count() == 0
    receipt = DeletionReceipt.objects.get(operation="cascade_document")
    assert receipt.member_ref == world.editor.pk and receipt.verification["clean"]


# --- recheck's own contract, called directly (the read paths reach some branches only after their own filters)
def _remembered(agent, **body) -> MemoryVersion:
    response = agent.remember(namespace="n", **body)
    assert response.status_code == 201, response.json()
    return MemoryVersion.objects.get(pk=int(response.json()["memory"]["id"]))


def test_recheck_hides_a_memory_whose_cited_document_expires_at_that_very_instant(world):
    """A document is readable strictly before its `expires_at` (`Document.objects.restrict`: expires_at > now)."""
    from memoryapp import visibility

    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Docs")
    document = gov_actions.create_document(collection, title="d", text="Dated text.")
    version = _remembered(agent, text="cites dated", citations=[str(document.current_version.passages.first().pk)])
    expiry = timezone.now() + timedelta(hours=1)
    Document.objects.filter(pk=document.pk).update(expires_at=expiry)
    before = visibility.recheck([version], world.editor, now=expiry - timedelta(microseconds=1))
    assert before.visible == [version] and before.hidden == 0
    at = visibility.recheck([version], world.editor, now=expiry)
    assert at.visible == [] and at.hidden == 1


def test_recheck_counts_each_memory_of_an_unreadable_collection_once_and_goes_on(world):
    """Each hidden memory counts 1 in `hidden`, and the ones after it are still checked."""
    from memoryapp import visibility

    agent = make_agent(world.editor)
    closed = gov_actions.create_collection(world.workspace, name="Closed")
    hidden_one = _remembered(agent, text="in closed one", collectionId=str(closed.pk))
    hidden_two = _remembered(agent, text="in closed two", collectionId=str(closed.pk))
    shown = _remembered(agent, text="outside")
    Collection.objects.filter(pk=closed.pk).update(restricted=True)
    result = visibility.recheck([hidden_one, hidden_two, shown], world.editor)
    assert result.visible == [shown] and result.hidden == 2


def test_recheck_hides_a_memory_whose_collection_is_another_workspaces(world):
    """Defence in depth: a collection id of another workspace is never readable, even unrestricted."""
    from memoryapp import visibility

    agent = make_agent(world.editor)
    foreign = gov_actions.create_collection(world.other_workspace, name="Theirs")
    version = _remembered(agent, text="stray")
    MemoryVersion.objects.filter(pk=version.pk).update(collection_id=foreign.pk)
    version.refresh_from_db()
    result = visibility.recheck([version], world.editor)
    assert result.visible == [] and result.hidden == 1
