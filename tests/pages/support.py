"""Helpers of the page tests that use Django's test client (no tests here): a browser signed in
as a member, each page's URL, a response's text and messages, and the date-time shapes pages show."""

from __future__ import annotations

import re

from django.test import Client


def browser(member_or_user=None, *, language: str | None = None, csrf_checks: bool = False) -> Client:
    headers = {"HTTP_ACCEPT_LANGUAGE": language} if language else {}
    client = Client(enforce_csrf_checks=csrf_checks, **headers)
    if member_or_user is not None:
        client.force_login(getattr(member_or_user, "user", member_or_user))
    return client


def url(world, page: str, workspace=None) -> str:
    ws = (workspace or world.workspace).pk
    return {
        "agent-memories": f"/w/{ws}/what-bundata-remembers/",
        "ai-memory": f"/w/{ws}/ai-memory/",
        "agent-access": f"/w/{ws}/settings/agent-access/",
        "ask-history": f"/w/{ws}/settings/ask-history/",
        "usage": f"/w/{ws}/usage/",
    }[page]


def text_of(response) -> str:
    return response.content.decode()


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


MOMENT = {
    "en": re.compile(
        r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [1-9][0-9]?, [0-9]{4}, [0-2][0-9]:[0-5][0-9] UTC"
    ),
    "ja": re.compile(r"[0-9]{4}年[1-9][0-9]?月[1-9][0-9]?日 [0-2][0-9]:[0-5][0-9] UTC"),
}
