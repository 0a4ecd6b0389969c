"""The isolation matrix (issue 8): every endpoint × every actor.

The editor owns an agent memory and an assistant memory carrying a secret marker. For every
other actor, on every agent operation, workspace endpoint and page: no response contains the
marker, a foreign memory id answers exactly like a missing one, and nothing of the editor's is
changed. The number of probes is printed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from governance import actions
from memoryapp.assistant import add_assistant_memory
from memoryapp.models import MemoryVersion
from tests.support import AgentClient, make_agent

SECRET = "zq-isolation-marker-7731"
MISSING = "987654321"


@pytest.fixture
def setup(world):
    owner_collection = actions.create_collection(world.workspace, name="Shared")
    outside_set = actions.create_context_set(
        world.workspace, name="Other set", collections=[owner_collection], documents=[]
    )
    editor_agent = make_agent(world.editor)
    agent_memory = editor_agent.remember(namespace="private", key="plan", text=f"Editor plan {SECRET}").json()[
        "memory"
    ]["id"]
    assistant_memory, _ = add_assistant_memory(
        world.editor, kind="fact", topic="secret_topic", summary=f"Assistant note {SECRET}"
    )
    revoked, revoked_token = actions.create_credential(
        world.editor, name="revoked", scopes=["memory:read", "memory:write"]
    )
    actions.revoke_credential(revoked, actor=world.editor.user)
    _, expired_token = actions.create_credential(
        world.editor,
        name="expired",
        scopes=["memory:read", "memory:write"],
        expires_at=timezone.now() + timedelta(seconds=1),
    )
    from governance.models import Credential

    Credential.objects.filter(name="expired").update(expires_at=timezone.now() - timedelta(seconds=1))
    admin_user = get_user_model().objects.create_user(
        "platform-admin@x.test", "platform-admin@x.test", "pw-admin-123", is_staff=True, is_superuser=True
    )
    agents = {
        "another member (viewer)": make_agent(world.viewer, scopes=["memory:read"]),
        "the owner": make_agent(world.owner),
        "another workspace's owner": make_agent(world.outsider),
        "revoked credential": AgentClient(revoked_token),
        "expired credential": AgentClient(expired_token),
        "credential bound to another context set": make_agent(world.editor, context_set=outside_set),
        "anonymous": AgentClient(""),
    }
    users = {
        "another member (viewer)": world.viewer.user,
        "the owner": world.owner.user,
        "platform admin without the content setting": admin_user,
        "another workspace's owner": world.outsider.user,
        "anonymous": None,
    }
    return {
        "agent_memory": agent_memory,
        "assistant_memory": str(assistant_memory.pk),
        "agents": agents,
        "users": users,
    }


def _agent_probes(memory_id: str):
    yield "list", {}
    yield "list", {"namespace": "private", "key": "plan"}
    yield "recall", {"query": f"Editor plan {SECRET}"}
    yield "forget", {"memoryId": memory_id}
    yield "forget", {"namespace": "private", "key": "plan"}
    yield "remember", {"namespace": "private", "key": "plan", "text": "overwrite attempt"}


def _workspace_probes(ws: int, agent_memory: str, assistant_memory: str):
    for path in (
        "ask-history/agent-memories",
        "ai-memory/memories",
        "ask-history/deletion-receipts",
        "ask-history/settings",
        "agent-credentials",
        "usage",
        "members",
        "collections",
        "documents",
    ):
        yield "get", f"/api/w/{ws}/{path}", None
    yield (
        "delete",
        f"/api/w/{ws}/ask-history/agent-memories/{agent_memory}",
        f"/api/w/{ws}/ask-history/agent-memories/{MISSING}",
    )
    yield "delete", f"/api/w/{ws}/ai-memory/memories/{assistant_memory}", f"/api/w/{ws}/ai-memory/memories/{MISSING}"
    yield "patch", f"/api/w/{ws}/ai-memory/memories/{assistant_memory}", f"/api/w/{ws}/ai-memory/memories/{MISSING}"
    yield (
        "post",
        f"/api/w/{ws}/ai-memory/memories/{assistant_memory}/reactivate",
        f"/api/w/{ws}/ai-memory/memories/{MISSING}/reactivate",
    )
    for page in ("what-bundata-remembers/", "ai-memory/", "settings/agent-access/", "settings/ask-history/", "usage/"):
        yield "get", f"/w/{ws}/{page}", None
    yield (
        "post",
        f"/w/{ws}/what-bundata-remembers/{agent_memory}/delete/",
        f"/w/{ws}/what-bundata-remembers/{MISSING}/delete/",
    )
    yield "post", f"/w/{ws}/ai-memory/{assistant_memory}/delete/", f"/w/{ws}/ai-memory/{MISSING}/delete/"
    yield "get", "/admin/memoryapp/memoryversion/", None
    yield "get", f"/admin/memoryapp/memoryversion/{agent_memory}/change/", None


def test_no_actor_ever_sees_or_changes_another_members_memory(world, setup, capsys):
    probes = 0
    editor_rows_before = set(MemoryVersion.objects.filter(member=world.editor).values_list("pk", "text", "valid_to"))
    for actor, agent in setup["agents"].items():
        for operation, body in _agent_probes(setup["agent_memory"]):
            response = agent.call(operation, body)
            probes += 1
            assert SECRET not in response.content.decode(), (actor, operation)
            assert response.status_code != 500, (actor, operation)
            if operation == "forget" and "memoryId" in body and response.status_code == 404:
                missing = agent.call("forget", {"memoryId": MISSING})
                probes += 1
                assert missing.status_code == 404 and missing.json() == response.json(), actor
    for actor, user in setup["users"].items():
        client = APIClient()
        if user is not None:
            client.force_login(user)
        for method, path, twin in _workspace_probes(
            world.workspace.pk, setup["agent_memory"], setup["assistant_memory"]
        ):
            body = {"summary": "overwrite attempt"} if method == "patch" else {}
            response = (
                getattr(client, method)(path, body, format="json")
                if method in ("post", "patch")
                else getattr(client, method)(path)
            )
            probes += 1
            content = response.content.decode(errors="replace")
            assert SECRET not in content, (actor, method, path)
            assert response.status_code < 500, (actor, method, path)
            if twin is not None and response.status_code in (403, 404):
                other = (
                    getattr(client, method)(twin, body, format="json")
                    if method in ("post", "patch")
                    else getattr(client, method)(twin)
                )
                probes += 1
                assert other.status_code == response.status_code, (
                    actor,
                    method,
                    path,
                    response.status_code,
                    other.status_code,
                )
    assert (
        set(MemoryVersion.objects.filter(member=world.editor).values_list("pk", "text", "valid_to"))
        >= editor_rows_before
    )
    assert not any(
        "overwrite attempt" in v.text for v in MemoryVersion.objects.filter(member=world.editor)
    )  # sealed: opened to be searched
    with capsys.disabled():
        print(
            f"\nisolation matrix: {probes} probes, {len(setup['agents'])} agent actors, {len(setup['users'])} user "
            "actors"
        )
    assert probes >= 170


def test_the_member_does_see_their_own_memory(world, setup):
    editor = make_agent(world.editor)
    assert SECRET in editor.list().content.decode()
    page_client = APIClient()
    page_client.force_login(world.editor.user)
    assert SECRET in page_client.get(f"/w/{world.workspace.pk}/what-bundata-remembers/").content.decode()
