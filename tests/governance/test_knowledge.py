"""Knowledge endpoints (SPEC §4.6) never return memories."""

from __future__ import annotations

import pytest

from tests.support import client_for, make_agent

pytestmark = pytest.mark.django_db


def test_knowledge_endpoints_never_return_memories(world, docs):
    from tests.support import fill, routes

    collection, document, passages = docs
    marker = "quincunxmemory"
    agent = make_agent(world.editor)
    assert (
        agent.remember(
            namespace="n",
            text=f"{marker} about Osaka shipping",
            citations=[str(passages[0].pk)],
            collectionId=str(collection.pk),
        ).status_code
        == 201
    )
    api = client_for(world.editor)
    knowledge = ("collections", "documents", "passages", "entities", "context-sets")
    ids = {
        "collection_id": str(collection.pk),
        "document_id": str(document.pk),
        "passage_id": str(passages[0].pk),
        "set_id": "1",
    }
    checked = 0
    for route, params in routes():
        tail = route.split("/", 3)[-1] if route.startswith("api/w/") else ""
        if not tail.startswith(knowledge):
            continue
        url = fill(route, {"ws_id": str(world.workspace.pk), **{p: ids.get(p, "1") for p in params if p != "ws_id"}})
        response = api.get(url)
        body = response.content.decode()
        assert marker not in body and '"type": "memory"' not in body and '"type":"memory"' not in body, url
        checked += 1
    assert checked >= 4
    assert api.get(f"/api/w/{world.workspace.pk}/passages/{passages[0].pk}").json()["text"] == passages[0].text


# --- the readability refusals, as the API answers them (SPEC §5) -------------------------------------
def _knowledge_url(world, path):
    return f"/api/w/{world.workspace.pk}/{path}"


@pytest.fixture
def unreadable(world):
    """For the editor: a restricted collection of the owner's with one document, a collection of
    another workspace with one, and an expired document in an open collection."""
    from datetime import timedelta

    from django.utils import timezone

    from governance import actions

    board = actions.create_collection(world.workspace, name="Board", restricted=True, creator=world.owner)
    foreign = actions.create_collection(world.other_workspace, name="Foreign")
    open_collection = actions.create_collection(world.workspace, name="Open")
    return {
        "collections": {"board": board, "foreign": foreign},
        "documents": {
            "board": actions.create_document(board, title="Minutes", text="secret"),
            "foreign": actions.create_document(foreign, title="Theirs", text="other workspace"),
            "expired": actions.create_document(
                open_collection, title="Old", text="gone", expires_at=timezone.now() - timedelta(seconds=1)
            ),
        },
        "open": open_collection,
        "open_document": actions.create_document(open_collection, title="Now", text="readable"),
    }


NO_COLLECTION = {
    "error": {
        "code": "VALIDATION_ERROR",
        "message": "The request is not valid.",
        "details": {"fields": {"collectionId": ["No such collection."]}},
    }
}


@pytest.mark.parametrize("which", ["board", "foreign", "missing"])
def test_a_document_in_a_collection_the_member_cannot_read_is_refused_as_no_such_collection(world, unreadable, which):
    from governance.models import Document

    collection_id = str(unreadable["collections"][which].pk) if which != "missing" else "999999"
    before = Document.objects.count()
    response = client_for(world.editor).post(
        _knowledge_url(world, "documents"), {"collectionId": collection_id, "title": "T", "text": "x"}, format="json"
    )
    assert (response.status_code, response.json()) == (400, NO_COLLECTION)
    assert Document.objects.count() == before
    readable = client_for(world.editor).post(
        _knowledge_url(world, "documents"),
        {"collectionId": str(unreadable["open"].pk), "title": "T", "text": "x"},
        format="json",
    )
    assert readable.status_code == 201


@pytest.mark.parametrize("which", ["board", "foreign", "missing"])
def test_a_context_set_naming_a_collection_the_member_cannot_read_is_refused(world, unreadable, which):
    from governance.models import ContextSet

    bad = str(unreadable["collections"][which].pk) if which != "missing" else "999999"
    body = {
        "name": "S",
        "collectionIds": [str(unreadable["open"].pk), bad],
        "documentIds": [str(unreadable["documents"]["board"].pk)],
    }
    response = client_for(world.editor).post(_knowledge_url(world, "context-sets"), body, format="json")
    expected = {
        "error": {
            "code": "VALIDATION_ERROR",
            "message": "The request is not valid.",
            "details": {"fields": {"collectionIds": ["No such collection."]}},
        }
    }
    assert (response.status_code, response.json()) == (400, expected)  # collections are checked first
    assert not ContextSet.objects.exists()


@pytest.mark.parametrize("which", ["board", "foreign", "expired", "missing"])
def test_a_context_set_naming_a_document_the_member_cannot_read_is_refused(world, unreadable, which):
    from governance.models import ContextSet

    bad = str(unreadable["documents"][which].pk) if which != "missing" else "999999"
    body = {
        "name": "S",
        "collectionIds": [str(unreadable["open"].pk)],
        "documentIds": [str(unreadable["open_document"].pk), bad],
    }
    response = client_for(world.editor).post(_knowledge_url(world, "context-sets"), body, format="json")
    expected = {
        "error": {
            "code": "VALIDATION_ERROR",
            "message": "The request is not valid.",
            "details": {"fields": {"documentIds": ["No such document."]}},
        }
    }
    assert (response.status_code, response.json()) == (400, expected)
    assert not ContextSet.objects.exists()


def test_a_context_set_may_name_a_readable_id_twice(world, unreadable):
    from governance.models import ContextSet

    collection, document = str(unreadable["open"].pk), str(unreadable["open_document"].pk)
    body = {"name": "S", "collectionIds": [collection, collection], "documentIds": [document, document]}
    response = client_for(world.editor).post(_knowledge_url(world, "context-sets"), body, format="json")
    assert response.status_code == 201
    created = ContextSet.objects.get(pk=int(response.json()["id"]))
    assert [c.pk for c in created.collections.all()] == [unreadable["open"].pk] and [
        d.pk for d in created.documents.all()
    ] == [unreadable["open_document"].pk]


@pytest.mark.parametrize("which", ["board", "foreign", "missing"])
def test_deleting_a_collection_the_member_cannot_read_is_not_found(world, unreadable, which):
    from governance.models import Collection

    collection_id = unreadable["collections"][which].pk if which != "missing" else 999999
    response = client_for(world.editor).delete(_knowledge_url(world, f"collections/{collection_id}"))
    assert (response.status_code, response.json()) == (
        404,
        {"error": {"code": "NOT_FOUND", "message": "No such collection.", "details": {}}},
    )
    assert Collection.objects.filter(pk__in=[c.pk for c in unreadable["collections"].values()]).count() == 2
    assert (
        client_for(world.editor).delete(_knowledge_url(world, f"collections/{unreadable['open'].pk}")).status_code
        == 204
    )
