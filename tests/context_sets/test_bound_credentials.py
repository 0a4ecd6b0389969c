"""A credential bound to a context set (SPEC §4.5): remembers, reads and forgets only inside the set."""

import pytest

from governance import actions
from memoryapp.models import MemoryVersion
from tests.support import error_code, make_agent


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
    for operation, body in (
        ("remember", {"namespace": "n", "text": "x", "collectionId": str(collection.pk)}),
        ("list", {}),
        ("recall", {"query": "x"}),
        ("forget", {"namespace": "n", "key": "k"}),
    ):
        assert error_code(agent.call(operation, body)) == "AGENT_CONTEXT_SET_SCOPE_REFUSED", operation
