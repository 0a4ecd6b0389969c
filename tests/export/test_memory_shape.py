"""One shape of a memory (issue 23 step 2): the agent API's `M`, the member's export and the
assistant-memory API are one function, `representation.memory_json`. The export is `M` plus the
fields only its member sees; the assistant shape shares `M`'s common fields; none recomputes a
date of its own."""

from __future__ import annotations

import json

from memoryapp import assistant
from memoryapp.models import MemoryVersion
from tests.support import client_for, make_agent

EXPORT_ONLY = {"current", "credentialId", "textSha256", "state", "erasedAt"}


def _export(member) -> dict:
    response = client_for(member).get(f"/api/w/{member.workspace_id}/me/export")
    return json.loads(b"".join(response.streaming_content))


def test_the_export_is_the_agent_apis_memory_plus_its_own_fields(world):
    agent = make_agent(world.editor)
    remembered = agent.remember(namespace="notes", key="tea", text="Prefers green tea in the afternoon.").json()[
        "memory"
    ]
    listed = agent.list(namespace="notes").json()["memories"][0]
    (exported,) = _export(world.editor)["agentMemories"]
    assert set(exported) == set(listed) | EXPORT_ONLY
    assert {k: exported[k] for k in listed} == listed
    assert remembered["expiresAt"] == exported["expiresAt"] == exported["erasedAt"]


def test_the_assistant_shape_shares_the_common_fields_and_its_erase_date_is_the_purges(world):
    version, _ = assistant.add_assistant_memory(world.editor, kind="preference", topic="drink", summary="Likes tea.")
    listing = assistant.list_assistant_memories(world.editor)
    (shown,) = listing["memories"]
    (exported,) = _export(world.editor)["assistantMemories"]
    common = {
        "id",
        "type",
        "evidence",
        "trust",
        "kind",
        "details",
        "source",
        "version",
        "createdAt",
        "expiresAt",
        "masked",
    }
    assert common <= set(shown) and {k: shown[k] for k in common} == {k: exported[k] for k in common}
    assert (shown["topic"], shown["summary"]) == (exported["key"], exported["text"])
    ask_history = world.workspace.ask_history
    MemoryVersion.objects.filter(pk=version.pk).update(
        state="expired", expired_at=version.retention_anchor
    )  # a stale expired_at
    (expired,) = assistant.list_assistant_memories(world.editor)["expired"]
    version.refresh_from_db()
    assert expired["erasedAt"] == _export(world.editor)["assistantMemories"][0]["erasedAt"]
    assert expired["erasedAt"].startswith(version.grace_ends_at(ask_history).strftime("%Y-%m-%dT%H:%M"))
