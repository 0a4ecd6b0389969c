"""Helpers the tests of every area call (no tests and no fixtures here; those are in conftest.py):
an API client signed in as a member, an agent's client with its own credential, the error code of
a refusal, and which database backend the suite runs on."""

from __future__ import annotations

import json

from django.conf import settings
from rest_framework.test import APIClient

from governance import actions
from governance.models import Member


def client_for(member_or_user) -> APIClient:
    user = getattr(member_or_user, "user", member_or_user)
    client = APIClient()
    client.force_authenticate(user)
    return client


class AgentClient:
    def __init__(self, token: str):
        self.token = token
        self.client = APIClient()

    def call(self, operation: str, body=None, *, raw: bytes | None = None, content_type: str = "application/json"):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.generic("POST", f"/api/agent/v1/memories/{operation}", data, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {self.token}")

    def remember(self, **body):
        return self.call("remember", body)

    def recall(self, **body):
        return self.call("recall", body)

    def list(self, **body):
        return self.call("list", body)

    def forget(self, **body):
        return self.call("forget", body)


def make_agent(member: Member, scopes=("memory:read", "memory:write"), **kwargs) -> AgentClient:
    _, token = actions.create_credential(member, name="test agent", scopes=list(scopes), **kwargs)
    return AgentClient(token)


def error_code(response) -> str:
    return response.json()["error"]["code"]


def on_postgres() -> bool:
    return settings.IS_POSTGRES
