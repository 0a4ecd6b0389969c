"""Helpers the tests of many areas call (no tests and no fixtures here; those are in conftest.py):
an API client signed in as a member, an agent's client with its own credential, the error code and
shape of a refusal, the texts of a listing, every URL route filled in, and the database backend.

Helpers one area shares stay in that area (tests/<area>/support.py)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver
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
        return self.client.generic(
            "POST",
            f"/api/agent/v1/memories/{operation}",
            data,
            content_type=content_type,
            HTTP_AUTHORIZATION=f"Bearer {self.token}",
        )

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


def _texts(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [m["text"] for m in response.json()["memories"]]


def routes(
    resolver: URLResolver | None = None, prefix: str = "", params: tuple[str, ...] = ()
) -> list[tuple[str, list[str]]]:
    """(route template, its parameter names) for every URL pattern, flattened."""
    resolver = resolver or get_resolver()
    found = []
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        names = params + tuple(getattr(entry.pattern, "converters", {}))
        if isinstance(entry, URLResolver):
            found.extend(routes(entry, route, names))
        elif isinstance(entry, URLPattern):
            found.append((route, list(names)))
    return found


def fill(route: str, values: dict[str, str]) -> str:
    import re

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], route).lstrip("^").rstrip("$")


def _refusal(response, status: int, code: str) -> dict:
    """SPEC §3: an error is {"error": {"code", "message", "details"}} with a message to show."""
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"].strip()
    assert isinstance(error["details"], dict)
    return error


def postgres_threads(test):
    """Marks a test of real threads against PostgreSQL's row locks (skipped on SQLite)."""
    for mark in (
        pytest.mark.postgres,
        pytest.mark.django_db(transaction=True),
        pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL"),
    ):
        test = mark(test)
    return test
