"""Attack on the new credential's connection snippet (issue 34 §6): its URL comes from the
request's Host header, the only part of it a caller can choose (the credential and workspace
names are not in it). Even with ALLOWED_HOSTS = ["*"], a Host that could break out of the shell
line or the JSON (quotes, `$(…)`, backticks, spaces, newlines) is refused before any credential
is created; an accepted one yields exactly two shell assignments and valid JSON."""

from __future__ import annotations

import json
import shlex

import pytest

from governance.models import Credential
from tests.pages.support import browser, url

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "host",
    [
        "a$(id)",
        "a`id`",
        "a'b",
        'a"b',
        "a b",
        "a;id",
        "a\\b",
        "a%0aexport",
        "a\nexport X=1",
        "a</textarea>",
        "a@evil.test",
    ],
)
def test_a_host_that_could_break_the_snippet_is_refused(world, settings, host):
    settings.ALLOWED_HOSTS = ["*"]
    response = browser(world.editor).post(
        url(world, "agent-access"), {"name": "Bot", "scopes": ["memory:read"]}, HTTP_HOST=host
    )
    assert response.status_code == 400
    assert not Credential.objects.filter(member=world.editor).exists()


@pytest.mark.parametrize("host", ["memory.example.test:8443", "[::1]:8020", "xn--mmory-bsa.example.test"])
def test_an_accepted_host_gives_two_assignments_and_valid_json(world, settings, host):
    settings.ALLOWED_HOSTS = ["*"]
    response = browser(world.editor).post(
        url(world, "agent-access"), {"name": "Bot", "scopes": ["memory:read"]}, HTTP_HOST=host, secure=True
    )
    snippet = response.context["created"]["snippet"]
    lines = [shlex.split(line) for line in snippet["env"].splitlines()]
    assert [line[0] for line in lines] == ["export", "export"] and all(len(line) == 2 for line in lines)
    assert dict(line[1].split("=", 1) for line in lines)["GAM_URL"] == f"https://{host}"
    assert json.loads(snippet["mcp"])["mcpServers"]["agent-memory"]["url"] == f"https://{host}/mcp"
