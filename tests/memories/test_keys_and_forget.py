"""SPEC §4.2–§4.5: supersession, asOf, forget, the live re-check, context sets, isolation."""

from datetime import timedelta

import pytest
from django.utils import timezone

from governance import actions
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from retention.models import DeletionReceipt
from tests.conftest import client_for, error_code, make_agent


def test_same_key_supersedes_and_chains(agent):
    first = agent.remember(namespace="prefs", key="editor", text="Uses vim").json()
    second = agent.remember(namespace="prefs", key="editor", text="Uses emacs now").json()
    assert first["superseded"] == 0 and second["superseded"] == 1
    assert second["memory"]["version"] == 2
    old = MemoryVersion.objects.get(pk=first["memory"]["id"])
    new = MemoryVersion.objects.get(pk=second["memory"]["id"])
    assert old.valid_to == new.valid_from
    listed = agent.list().json()["memories"]
    assert [m["text"] for m in listed] == ["Uses emacs now"]


def test_keyless_memories_never_supersede(agent):
    agent.remember(namespace="n", text="one")
    second = agent.remember(namespace="n", text="two").json()
    assert second["superseded"] == 0
    assert len(agent.list().json()["memories"]) == 2


def test_as_of_returns_what_was_current_then(agent, time_machine):
    start = timezone.now()
    time_machine.move_to(start)
    agent.remember(namespace="prefs", key="editor", text="Uses vim")
    time_machine.move_to(start + timedelta(hours=1))
    agent.remember(namespace="prefs", key="editor", text="Uses emacs")
    time_machine.move_to(start + timedelta(hours=2))
    between = (start + timedelta(minutes=30)).isoformat()
    before = (start - timedelta(minutes=1)).isoformat()
    assert [m["text"] for m in agent.list(asOf=between).json()["memories"]] == ["Uses vim"]
    assert agent.list(asOf=before).json()["memories"] == []
    assert [m["text"] for m in agent.list().json()["memories"]] == ["Uses emacs"]
    recalled = agent.recall(query="vim", asOf=between).json()["memories"]
    assert [m["text"] for m in recalled] == ["Uses vim"]


def test_forget_by_key_removes_every_version_and_every_as_of(agent, time_machine):
    start = timezone.now()
    time_machine.move_to(start)
    agent.remember(namespace="prefs", key="editor", text="Uses vim")
    time_machine.move_to(start + timedelta(hours=1))
    agent.remember(namespace="prefs", key="editor", text="Uses emacs")
    time_machine.move_to(start + timedelta(hours=2))
    response = agent.forget(namespace="prefs", key="editor")
    assert response.status_code == 200 and response.json()["forgotten"] == 2
    receipt = DeletionReceipt.objects.get(pk=response.json()["receiptId"])
    assert receipt.verification["clean"] is True and receipt.manifest["artifacts"]["memory_version"] == 2
    assert agent.list(asOf=(start + timedelta(minutes=30)).isoformat()).json()["memories"] == []
    assert MemoryVersion.objects.count() == 0 and MemoryEmbedding.objects.count() == 0


def test_forget_by_an_old_version_id_removes_the_whole_chain(agent):
    first = agent.remember(namespace="prefs", key="editor", text="Uses vim").json()["memory"]["id"]
    agent.remember(namespace="prefs", key="editor", text="Uses emacs")
    agent.remember(namespace="prefs", text="keyless stays")
    assert agent.forget(memoryId=first).json()["forgotten"] == 2
    assert [m["text"] for m in agent.list().json()["memories"]] == ["keyless stays"]


def test_forget_nothing_matched_is_404(agent):
    assert error_code(agent.forget(namespace="n", key="none")) == "MEMORY_NOT_FOUND"
    assert error_code(agent.forget(memoryId="424242")) == "MEMORY_NOT_FOUND"


def test_another_members_memory_is_indistinguishable_from_a_missing_one(world, agent):
    theirs = make_agent(world.owner).remember(namespace="n", text="owner's private note").json()["memory"]["id"]
    mine_missing = agent.forget(memoryId="999999")
    not_mine = agent.forget(memoryId=theirs)
    assert not_mine.status_code == mine_missing.status_code == 404
    assert not_mine.json() == mine_missing.json()
    assert MemoryVersion.objects.filter(pk=theirs).exists()


def test_isolation_between_members_and_workspaces(world):
    owner, editor, outsider = make_agent(world.owner), make_agent(world.editor), make_agent(world.outsider)
    editor.remember(namespace="n", text="editor secret about apricots")
    for other in (owner, outsider):
        assert other.list().json()["memories"] == []
        assert other.recall(query="apricots").json()["memories"] == []
        assert other.forget(namespace="n", key="k").status_code == 404
    assert "apricots" not in client_for(world.owner).get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories").content.decode()


def test_citations_store_hashes_not_text(agent, docs):
    _, document, passages = docs
    response = agent.remember(namespace="n", text="ships from Osaka", citations=[str(passages[0].pk)])
    memory = response.json()["memory"]
    assert memory["citations"] == [{"passageId": str(passages[0].pk), "documentId": str(document.pk), "sha256": passages[0].sha256, "sourceState": "current"}]
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


@pytest.mark.parametrize("cause", ["document_deleted", "document_expired", "collection_restricted", "collection_deleted"])
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


def test_deleting_a_cited_document_erases_the_memory_with_a_receipt(agent, world, docs, django_capture_on_commit_callbacks):
    _, document, passages = docs
    agent.remember(namespace="n", text="cites the handbook", citations=[str(passages[0].pk)])
    with django_capture_on_commit_callbacks(execute=True):
        actions.delete_document(document, actor=world.owner.user)
    assert MemoryVersion.objects.count() == 0
    receipt = DeletionReceipt.objects.get(operation="cascade_document")
    assert receipt.member_ref == world.editor.pk and receipt.verification["clean"]


def test_collection_id_must_be_readable(agent, world):
    restricted = actions.create_collection(world.workspace, name="Board", restricted=True, readers=[world.owner])
    response = agent.remember(namespace="n", text="x", collectionId=str(restricted.pk))
    assert error_code(response) == "VALIDATION_ERROR"


def test_list_paginates_newest_first_with_a_stable_cursor(agent):
    for i in range(7):
        agent.remember(namespace="n", text=f"note {i}")
    seen, cursor = [], None
    while True:
        body = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = agent.list(**body).json()
        seen += [m["text"] for m in page["memories"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"note {i}" for i in reversed(range(7))]


def test_list_refills_a_page_past_hidden_memories_and_counts_them(agent, world, docs):
    _, document, passages = docs
    agent.remember(namespace="n", text="visible old")
    for i in range(4):
        agent.remember(namespace="n", text=f"cites {i}", citations=[str(passages[0].pk)])
    document.expires_at = timezone.now() - timedelta(seconds=1)
    document.save()
    page = agent.list(limit=1).json()
    assert [m["text"] for m in page["memories"]] == ["visible old"] and page["hidden"] == 4 and page["nextCursor"] is None


def test_list_query_count_does_not_grow_with_citations(agent, docs, django_assert_max_num_queries):
    _, _, passages = docs
    for i in range(30):
        agent.remember(namespace="n", text=f"note {i}", citations=[str(p.pk) for p in passages])
    with django_assert_max_num_queries(8):
        response = agent.list(limit=100)
    assert len(response.json()["memories"]) == 30


def test_recall_query_count_is_constant(agent, world, docs, django_assert_max_num_queries):
    _, _, passages = docs
    actions.create_entity(world.workspace, name="Osaka", aliases=[])
    for i in range(40):
        agent.remember(namespace="n", text=f"note {i} about Osaka", citations=[str(p.pk) for p in passages])
    with django_assert_max_num_queries(10):  # 9 for the read, 1 INSERT for its access entry
        response = agent.recall(query="Osaka shipping", limit=50)
    assert response.json()["considered"] == 40


# --- context sets ----------------------------------------------------------------------------
@pytest.fixture
def bound(world, docs):
    collection, document, passages = docs
    other_collection = actions.create_collection(world.workspace, name="Outside")
    outside_doc = actions.create_document(other_collection, title="o", text="outside text")
    context_set = actions.create_context_set(world.workspace, name="Shipping", collections=[collection], documents=[])
    agent = make_agent(world.editor, context_set=context_set)
    return agent, context_set, collection, passages, other_collection, outside_doc.current_version.passages.first()


def test_bound_remember_rules(bound):
    agent, _, collection, passages, other_collection, outside_passage = bound
    assert agent.remember(namespace="n", text="in set", collectionId=str(collection.pk)).status_code == 201
    assert agent.remember(namespace="n", text="cites in set", citations=[str(passages[0].pk)]).status_code == 201
    for body in (
        {"namespace": "n", "text": "neither"},
        {"namespace": "n", "text": "other collection", "collectionId": str(other_collection.pk)},
        {"namespace": "n", "text": "cites outside", "citations": [str(outside_passage.pk)]},
    ):
        assert error_code(agent.remember(**body)) == "AGENT_CONTEXT_SET_SCOPE_REFUSED", body


def test_bound_reads_only_see_the_set(bound, world):
    agent, _, collection, _, other_collection, _ = bound
    agent.remember(namespace="n", text="inside apricot", collectionId=str(collection.pk))
    make_agent(world.editor).remember(namespace="n", text="outside apricot")
    assert [m["text"] for m in agent.list().json()["memories"]] == ["inside apricot"]
    assert [m["text"] for m in agent.recall(query="apricot").json()["memories"]] == ["inside apricot"]
    assert error_code(agent.list(collectionId=str(other_collection.pk))) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"


def test_bound_forget_refuses_outside_memories(bound, world):
    agent, *_ = bound
    outside = make_agent(world.editor).remember(namespace="n", text="outside").json()["memory"]["id"]
    assert error_code(agent.forget(memoryId=outside)) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    assert MemoryVersion.objects.filter(pk=outside).exists()


@pytest.mark.parametrize("change", ["inactive", "deleted"])
def test_inactive_or_deleted_set_refuses_everything(bound, world, change):
    agent, context_set, collection, *_ = bound
    if change == "inactive":
        actions.set_context_set_active(context_set, False, actor=world.owner.user)
    else:
        actions.delete_context_set(context_set, actor=world.owner.user)
    for operation, body in (("remember", {"namespace": "n", "text": "x", "collectionId": str(collection.pk)}), ("list", {}), ("recall", {"query": "x"}), ("forget", {"namespace": "n", "key": "k"})):
        assert error_code(agent.call(operation, body)) == "AGENT_CONTEXT_SET_SCOPE_REFUSED", operation
