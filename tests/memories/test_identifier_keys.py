"""Identifiers are not personal data, everywhere the name check runs (issue 34 row 3): UUID- and
ULID-shaped keys and namespaces through REST and MCP (the same gate), assistant topics, and
conversation ids; personal data in a key next to one is still refused on every path."""

from __future__ import annotations

import random
import uuid

import pytest

from core.errors import ApiError
from memoryapp.api.conversations import ReplyUsageBody
from memoryapp.assistant import add_assistant_memory
from memoryapp.mcp.tools import run_operation
from tests.support import error_code

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _refused_whole(name: str) -> bool:
    from bench.identifier_keys import whole_name_kinds

    return bool(whole_name_kinds(name))


def _uuids_refused_before(n: int, spell) -> list[str]:
    """uuid4 spellings that the check refused when it read them whole: the cases that matter."""
    rng = random.Random(34)
    out: list[str] = []
    while len(out) < n:
        candidate = spell(uuid.UUID(int=rng.getrandbits(128), version=4))
        if _refused_whole(candidate):
            out.append(candidate)
    return out


SPELLINGS = {"str": str, "hex": lambda u: u.hex, "STR": lambda u: str(u).upper(), "HEX": lambda u: u.hex.upper()}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_uuid_keys_and_namespaces_once_refused_are_stored_listed_and_forgotten(agent, spelling):
    for ident in _uuids_refused_before(3, SPELLINGS[spelling]):
        stored = agent.remember(namespace=ident[:64], key=ident, text="Thread notes.")
        assert stored.status_code == 201, stored.json()
        listed = agent.list(namespace=ident[:64], key=ident).json()["memories"]
        assert [m["key"] for m in listed] == [ident]
        assert agent.forget(namespace=ident[:64], key=ident).status_code == 200


def test_ulid_keys_are_accepted(agent):
    rng = random.Random(26)
    for _ in range(20):
        ulid = rng.choice("01") + "".join(rng.choice(CROCKFORD) for _ in range(25))
        assert agent.remember(namespace="runs", key=f"run-{ulid}", text="A run.").status_code == 201


def test_mcp_accepts_the_same_identifiers_and_refuses_the_same_personal_data(world):
    from governance import actions

    _, token = actions.create_credential(world.editor, name="mcp", scopes=["memory:read", "memory:write"])
    ident = _uuids_refused_before(1, str)[0]
    ok = run_operation(token, "remember", {"namespace": "threads", "key": ident, "text": "Thread notes."})
    assert not ok.is_error and ok.structured_content["memory"]["key"] == ident
    refused = run_operation(
        token, "remember", {"namespace": "threads", "key": f"{ident}_+81 90-1234-5678", "text": "x"}
    )
    assert refused.is_error and refused.structured_content["error"]["code"] == "AGENT_MEMORY_PERSONAL_DATA"


@pytest.mark.parametrize(
    "key",
    [
        "ada@example.com",
        "4111 1111 1111 1111",
        "+81 90-1234-5678",
        "user-{id}-ada@example.com",
        "{id}:4111111111111111",
        "{id}_090-1234-5678",
    ],
)
def test_personal_data_in_a_key_or_namespace_is_still_refused(agent, key):
    key = key.format(id=uuid.uuid4())
    assert error_code(agent.remember(namespace="n", key=key, text="x")) == "AGENT_MEMORY_PERSONAL_DATA"
    assert error_code(agent.remember(namespace=key[:64], text="x")) == "AGENT_MEMORY_PERSONAL_DATA"
    assert error_code(agent.list(namespace=key[:64])) == "AGENT_MEMORY_PERSONAL_DATA"


def test_an_assistant_topic_is_read_without_the_identifier_cut_out(world):
    """Topics are English words a person or the extraction vocabulary chose, never program
    identifiers: a UUID in one is read as written, so digits padded into its shape are refused
    (docs/decisions.md, "Identifiers in keys")."""
    ident = _uuids_refused_before(1, lambda u: u.hex)[0]
    with pytest.raises(ApiError) as caught:
        add_assistant_memory(world.editor, kind="fact", topic=f"note_{ident}", summary="A note.")
    assert caught.value.code == "AGENT_MEMORY_PERSONAL_DATA"


def test_a_uuid_conversation_id_is_accepted_and_a_phone_number_is_not():
    ident = _uuids_refused_before(1, str)[0]
    body = {"conversationId": ident, "model": "gpt-x", "inputTokens": 1, "outputTokens": 1}
    assert ReplyUsageBody(data=body).is_valid()
    assert not ReplyUsageBody(data={**body, "conversationId": f"{ident} +81 90-1234-5678"}).is_valid()
