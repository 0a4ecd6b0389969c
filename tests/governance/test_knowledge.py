"""Knowledge endpoints (SPEC §4.6) never return memories."""

from __future__ import annotations

import pytest

from tests.conftest import client_for, make_agent

pytestmark = pytest.mark.django_db


def test_knowledge_endpoints_never_return_memories(world, docs):
    from tests.isolation.test_owner_sees_counts import fill, routes

    collection, document, passages = docs
    marker = "quincunxmemory"
    agent = make_agent(world.editor)
    assert agent.remember(namespace="n", text=f"{marker} about Osaka shipping", citations=[str(passages[0].pk)], collectionId=str(collection.pk)).status_code == 201
    api = client_for(world.editor)
    knowledge = ("collections", "documents", "passages", "entities", "context-sets")
    ids = {"collection_id": str(collection.pk), "document_id": str(document.pk), "passage_id": str(passages[0].pk), "set_id": "1"}
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
