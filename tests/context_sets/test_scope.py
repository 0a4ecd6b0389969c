"""Context sets (SPEC §4.5, §2 row 10): a bound credential remembers, reads and forgets only inside its set; an inactive
or deleted set refuses everything."""

from __future__ import annotations

import pytest
from django.utils import timezone

from governance import actions
from governance import actions as gov_actions
from tests.support import _refusal, _texts, error_code, make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def scoped(world):
    """A set holding collection `inside` and one listed document of collection `loose`."""
    inside = gov_actions.create_collection(world.workspace, name="Inside")
    in_doc = gov_actions.create_document(inside, title="in", text="Orders ship from Osaka.")
    loose = gov_actions.create_collection(world.workspace, name="Loose")
    listed = gov_actions.create_document(loose, title="listed", text="Listed in the set.")
    neighbour = gov_actions.create_document(loose, title="neighbour", text="Not in the set.")
    context_set = gov_actions.create_context_set(world.workspace, name="Set", collections=[inside], documents=[listed])
    agent = make_agent(world.editor, context_set=context_set)

    def pid(document):
        return str(document.current_version.passages.first().pk)

    return {
        "agent": agent,
        "set": context_set,
        "inside": inside,
        "loose": loose,
        "in": pid(in_doc),
        "listed": pid(listed),
        "neighbour": pid(neighbour),
    }


def test_a_bound_remember_needs_a_collection_or_citations_inside_the_set(scoped):
    agent = scoped["agent"]
    _refusal(agent.remember(namespace="n", text="nowhere"), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    assert (
        agent.remember(namespace="n", text="in the collection", collectionId=str(scoped["inside"].pk)).status_code
        == 201
    )
    assert agent.remember(namespace="n", text="cites inside", citations=[scoped["in"]]).status_code == 201
    assert agent.remember(namespace="n", text="cites listed", citations=[scoped["listed"]]).status_code == 201
    both = agent.remember(
        namespace="n", text="both", collectionId=str(scoped["inside"].pk), citations=[scoped["listed"], scoped["in"]]
    )
    assert both.status_code == 201, both.content
    _refusal(
        agent.remember(namespace="n", text="out", collectionId=str(scoped["loose"].pk)),
        403,
        "AGENT_CONTEXT_SET_SCOPE_REFUSED",
    )
    _refusal(
        agent.remember(namespace="n", text="neighbour", citations=[scoped["neighbour"]]),
        403,
        "AGENT_CONTEXT_SET_SCOPE_REFUSED",
    )
    _refusal(
        agent.remember(namespace="n", text="mixed", citations=[scoped["in"], scoped["neighbour"]]),
        403,
        "AGENT_CONTEXT_SET_SCOPE_REFUSED",
    )
    _refusal(
        agent.remember(namespace="n", text="missing", citations=[scoped["in"], "999999"]),
        403,
        "AGENT_CONTEXT_SET_SCOPE_REFUSED",
    )
    _refusal(
        agent.remember(
            namespace="n",
            text="in set, cites out",
            collectionId=str(scoped["inside"].pk),
            citations=[scoped["neighbour"]],
        ),
        403,
        "AGENT_CONTEXT_SET_SCOPE_REFUSED",
    )


@pytest.mark.parametrize("change", [{"active": False}, {"deleted_at": "now"}])
def test_an_inactive_or_deleted_bound_set_refuses_everything(world, scoped, change):
    agent = scoped["agent"]
    assert agent.list().status_code == 200
    for field, value in change.items():
        setattr(scoped["set"], field, timezone.now() if value == "now" else value)
    scoped["set"].save()
    for response in (
        agent.list(),
        agent.recall(query="x"),
        agent.remember(namespace="n", text="x", collectionId=str(scoped["inside"].pk)),
        agent.forget(namespace="n", key="k"),
    ):
        _refusal(response, 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


def test_forget_refuses_a_memory_outside_the_set_and_allows_one_inside(world, scoped):
    agent, unbound = scoped["agent"], make_agent(world.editor)
    outside = unbound.remember(namespace="n", key="out", text="outside the set").json()["memory"]
    inside = agent.remember(namespace="n", key="in", text="inside", collectionId=str(scoped["inside"].pk)).json()[
        "memory"
    ]
    _refusal(agent.forget(memoryId=str(outside["id"])), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")
    assert agent.forget(memoryId=str(inside["id"])).json()["forgotten"] == 1
    assert unbound.forget(memoryId=str(outside["id"])).status_code == 200


def test_recall_and_list_with_a_collection_outside_the_set_are_refused(scoped):
    agent = scoped["agent"]
    for call in (agent.list, agent.recall):
        extra = {} if call == agent.list else {"query": "x"}
        assert call(collectionId=str(scoped["inside"].pk), **extra).status_code == 200
        _refusal(call(collectionId=str(scoped["loose"].pk), **extra), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


def test_a_bound_credential_sees_only_memories_inside_its_set(world, scoped):
    """§4.5: inside = in one of the set's collections, or cited; and every citation's document in
    the set (listed, or in a listed collection)."""
    unbound, agent = make_agent(world.editor), scoped["agent"]
    inside, loose = str(scoped["inside"].pk), str(scoped["loose"].pk)
    bodies = {
        "in collection": {"collectionId": inside},
        "cites inside": {"citations": [scoped["in"]]},
        "cites listed": {"citations": [scoped["listed"]]},
        "nowhere": {},
        "in collection, cites outside": {"collectionId": inside, "citations": [scoped["neighbour"]]},
        "outside collection, cites listed": {"collectionId": loose, "citations": [scoped["listed"]]},
        "cites listed and outside": {"citations": [scoped["listed"], scoped["neighbour"]]},
        "outside collection": {"collectionId": loose},
    }
    ids = {}
    for text, body in bodies.items():
        response = unbound.remember(namespace="n", text=f"{text} memo", **body)
        assert response.status_code == 201, response.content
        ids[text] = response.json()["memory"]["id"]
    expected = {"in collection memo", "cites inside memo", "cites listed memo"}
    assert set(_texts(agent.list(limit=50))) == expected
    assert set(_texts(agent.recall(query="memo collection cites listed inside outside nowhere", limit=50))) <= expected
    for text in (
        "nowhere",
        "in collection, cites outside",
        "outside collection, cites listed",
        "cites listed and outside",
    ):
        _refusal(agent.forget(memoryId=str(ids[text])), 403, "AGENT_CONTEXT_SET_SCOPE_REFUSED")


def test_a_bound_credential_cannot_tell_an_unreadable_passage_in_its_set_from_a_missing_one(world, docs):
    collection, _, _ = docs
    board = actions.create_collection(world.workspace, name="Board", restricted=True, readers=[world.owner])
    unreadable_inside = actions.create_document(board, title="b", text="board minutes").current_version.passages.first()
    context_set = actions.create_context_set(
        world.workspace, name="With board", collections=[collection, board], documents=[]
    )
    agent = make_agent(world.editor, context_set=context_set)
    answers = [
        agent.remember(namespace="n", text="x", collectionId=str(collection.pk), citations=[pid]).json()["error"]
        for pid in (str(unreadable_inside.pk), "999999")
    ]
    assert answers[0]["code"] == answers[1]["code"] == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    assert answers[0]["message"] == answers[1]["message"]


def test_a_document_listed_directly_in_a_set_is_inside_it(world, docs):
    _, _, _ = docs
    loose = actions.create_collection(world.workspace, name="Loose")
    listed_document = actions.create_document(loose, title="Listed", text="Listed directly in the set.")
    other_document = actions.create_document(loose, title="Not listed", text="Same collection, not in the set.")
    context_set = actions.create_context_set(world.workspace, name="Docs", collections=[], documents=[listed_document])
    agent = make_agent(world.editor, context_set=context_set)
    inside = agent.remember(
        namespace="n",
        text="cites the listed document",
        citations=[str(listed_document.current_version.passages.first().pk)],
    )
    assert inside.status_code == 201, inside.content
    outside = agent.remember(
        namespace="n", text="cites its neighbour", citations=[str(other_document.current_version.passages.first().pk)]
    )
    assert error_code(outside) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
    assert [m["text"] for m in agent.list().json()["memories"]] == ["cites the listed document"]
    assert [m["text"] for m in agent.recall(query="listed document").json()["memories"]] == [
        "cites the listed document"
    ]


def test_recall_with_a_collection_outside_the_set_is_refused(bound):
    agent, collection, _, outside, _ = bound
    assert agent.recall(query="x", collectionId=str(collection.pk)).status_code == 200
    refused = agent.recall(query="x", collectionId=str(outside.pk))
    assert refused.status_code == 403 and error_code(refused) == "AGENT_CONTEXT_SET_SCOPE_REFUSED"
