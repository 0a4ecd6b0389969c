"""Bad input never produces a 500 and never stores anything."""

import json

import pytest

from memoryapp.models import MemoryVersion
from tests.support import client_for

OPERATIONS = ["remember", "recall", "list", "forget"]
BAD_BODIES = {
    "invalid_utf8": b'{"namespace": "n", "text": "\xff\xfe\xfd"}',
    "deep_nesting": ("[" * 5000 + "]" * 5000).encode(),
    "nul_bytes": json.dumps({"namespace": "n\u0000", "text": "a\u0000b", "query": "q\u0000"}).encode(),
    "huge_number": b'{"namespace": "n", "text": "x", "limit": 1e400, "memoryId": 99999999999999999999999}',
    "wrong_types": json.dumps(
        {"namespace": ["n"], "text": {"a": 1}, "query": 5, "limit": "ten", "citations": [None], "asOf": 5}
    ).encode(),
    "empty": b"",
    "null": b"null",
    "not_json": b"namespace=n&text=x",
    "lone_surrogate": b'{"namespace": "n", "text": "\\ud800"}',
}


@pytest.mark.parametrize(
    "operation, name",
    # An empty body is a valid list request (no filters): not a bad body for that operation.
    [
        (operation, name)
        for operation in OPERATIONS
        for name in sorted(BAD_BODIES)
        if (operation, name) != ("list", "empty")
    ],
)
def test_bad_bodies_answer_a_clear_4xx_and_store_nothing(agent, operation, name):
    response = agent.call(operation, raw=BAD_BODIES[name])
    assert 400 <= response.status_code < 500, (operation, name, response.status_code)
    assert "code" in response.json()["error"]
    assert MemoryVersion.objects.count() == 0


def test_an_empty_body_is_a_valid_list_request(agent):
    response = agent.call("list", raw=b"")
    assert response.status_code == 200 and response.json()["memories"] == []


def test_a_very_long_authorization_header_is_unauthenticated(client, world):
    response = client.post(
        "/api/agent/v1/memories/list",
        b"{}",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer " + "a" * 20000,
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "path", ["collections", "documents", "entities", "context-sets", "agent-credentials", "ai-memory/memories"]
)
@pytest.mark.parametrize("name", ["invalid_utf8", "deep_nesting", "nul_bytes", "wrong_types", "null"])
def test_workspace_api_bad_bodies_are_4xx(world, path, name):
    response = client_for(world.owner).generic(
        "POST", f"/api/w/{world.workspace.pk}/{path}", BAD_BODIES[name], content_type="application/json"
    )
    assert 400 <= response.status_code < 500, (path, name, response.status_code, response.content[:200])
