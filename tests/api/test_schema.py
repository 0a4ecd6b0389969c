"""The agent endpoints' answers are described in /api/schema/ (memory object, recall, list, forget,
turns, the error body) and every real answer conforms: what the Python client types its results
from (clients/python) must be what the server sends."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from schemathesis.specs.openapi.checks import response_schema_conformance

from governance.models import Agent
from tests.support import make_agent

# Django's application without config.wsgi's start-up check (a served process's, which reads the key
# store at import: here the test database does not exist yet).
application = get_wsgi_application()

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

# Called through the WSGI application, not the test client: it must not close the test's connection.
pytestmark = pytest.mark.usefixtures("_keep_the_test_connection")


def call(token: str, path: str, body: dict):
    case = schema[path]["POST"].Case(
        body=body, headers={"Authorization": f"Bearer {token}"}, media_type="application/json"
    )
    response = case.call()
    case.validate_response(response, checks=[response_schema_conformance])
    return response


def test_every_agent_answer_conforms_to_its_described_schema(world):
    token = make_agent(world.editor).token
    remembered = call(
        token,
        "/api/agent/v1/memories/remember",
        {
            "namespace": "prefs",
            "key": "editor",
            "text": "Prefers vim; mail ada@example.com",
            "kind": "preference",
            "details": ["one"],
        },
    )
    assert remembered.status_code == 201
    assert (
        call(
            token, "/api/agent/v1/memories/remember", {"namespace": "prefs", "key": "editor", "text": "Prefers helix"}
        ).json()["superseded"]
        == 1
    )
    recalled = call(token, "/api/agent/v1/memories/recall", {"query": "which editor"})
    assert recalled.status_code == 200 and recalled.json()["memories"][0]["ranks"]
    listed = call(token, "/api/agent/v1/memories/list", {"limit": 1})
    assert listed.json()["nextCursor"] is None or isinstance(listed.json()["nextCursor"], str)
    for body in ({"query": ""}, {"query": "x", "limit": 0}):
        assert call(token, "/api/agent/v1/memories/recall", body).status_code == 400
    assert call("gam_unknown", "/api/agent/v1/memories/list", {}).status_code == 401
    assert call(token, "/api/agent/v1/memories/forget", {"memoryId": "999999999"}).status_code == 404
    assert (
        call(token, "/api/agent/v1/memories/forget", {"namespace": "prefs", "key": "editor"}).json()["forgotten"] == 2
    )
    agent = Agent.objects.create(workspace=world.workspace, name="bot", vector_memory=True)
    turn = call(
        token,
        "/api/agent/v1/conversations/turns",
        {
            "agentId": str(agent.pk),
            "conversationId": "c1",
            "messages": [{"role": "user", "content": "mail ada@example.com"}],
        },
    )
    assert turn.json()["consolidation"]["reason"] == "personal_data"


def test_the_memory_object_says_it_is_untrusted_and_not_evidence():
    components = schema.raw_schema["components"]["schemas"]
    memory = components["MemoryObject"]
    assert (
        set(memory["required"])
        == set(memory["properties"])
        >= {"id", "trust", "evidence", "text", "masked", "citations"}
    )
    assert components[memory["properties"]["trust"]["allOf"][0]["$ref"].rsplit("/", 1)[-1]]["enum"] == ["untrusted"]
    assert components[memory["properties"]["evidence"]["allOf"][0]["$ref"].rsplit("/", 1)[-1]]["enum"] == [False]
    recall = schema.raw_schema["paths"]["/api/agent/v1/memories/recall"]["post"]["responses"]
    assert recall["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/RecallResponse")
    assert recall["429"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")


def test_the_served_schema_is_english_whatever_the_callers_language(db):
    """Choice labels are translated for the pages (Source, AccessSurface); the OpenAPI document is
    one text, English, unless `?lang=` asks."""
    from django.test import Client

    client = Client()
    english = client.get("/api/schema/?format=json", HTTP_ACCEPT_LANGUAGE="en").content
    japanese_browser = client.get("/api/schema/?format=json", HTTP_ACCEPT_LANGUAGE="ja").content
    assert english == japanese_browser
    assert "ユーザー".encode() not in japanese_browser and b"User request" in english
