"""A sealed value is bound to its owner (issue 24 step 1, SPEC §8.2): the associated data names
the workspace and member the visibility rules read, so someone who can write the database but has
no key cannot make the application decrypt a victim's memory into their own list.

The reviewer's two reproductions: copying the victim's key id and ciphertexts into one's own row,
and re-owning the victim's row (UPDATE member_id, or workspace_id too). Either way the moved row
reads as hidden (logged with ids only, counted), never a 500, and the victim's text appears in
none of the attacker's list, recall, export or AI memory page.
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from credits.models import Consolidation
from memoryapp import crypto, metrics, sealing
from memoryapp.assistant import add_assistant_memory, list_assistant_memories
from memoryapp.models import MemoryEmbedding, MemoryVersion
from tests.support import client_for, make_agent

MARKER = "vermilionoctopus"
VERSION_COLUMNS = ("text", "details", "kind")
ENTRY_COLUMNS = ("vector", "terms")


def raw(table: str, columns: tuple[str, ...], pk_column: str, pk: int) -> list:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE {pk_column} = %s", [pk])
        return list(cursor.fetchone())


def write_raw(table: str, columns: tuple[str, ...], pk_column: str, pk: int, values: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {', '.join(f'{c} = %s' for c in columns)} WHERE {pk_column} = %s", [*values, pk]
        )


def remember(agent, text: str) -> int:
    response = agent.remember(namespace="notes", text=text)
    assert response.status_code == 201, response.json()
    return int(response.json()["memory"]["id"])


def unreadable(model: str) -> float:
    return metrics.SEALED_UNREADABLE.labels(model, sealing.CORRUPT)._value.get()


def everything_the_member_sees(member, agent) -> str:
    """The attacker's list, recall, export and AI memory page, each answered without a 500."""
    seen = []
    listed = agent.list(limit=100)
    assert listed.status_code == 200
    seen.append(listed.content.decode())
    recalled = agent.recall(query=MARKER, limit=20)
    assert recalled.status_code == 200
    seen.append(recalled.content.decode())
    export = client_for(member).get(f"/api/w/{member.workspace_id}/me/export")
    assert export.status_code == 200
    seen.append(b"".join(export.streaming_content).decode())
    seen.append(json.dumps(list_assistant_memories(member), default=str))
    return "\n".join(seen)


def test_copying_a_victims_key_id_and_ciphertexts_into_ones_own_row_shows_nothing_of_them(world, caplog):
    victim, attacker = world.editor, world.owner
    victim_agent, attacker_agent = make_agent(victim), make_agent(attacker)
    stolen = remember(victim_agent, f"the {MARKER} diagnosis")
    own = remember(attacker_agent, "the attacker's own harmless note")
    key_id = MemoryVersion.objects.values_list("key_id", flat=True).get(pk=stolen)
    texts = raw("memoryapp_memoryversion", VERSION_COLUMNS, "id", stolen)
    entry = raw("memoryapp_memoryembedding", ENTRY_COLUMNS, "memory_id", stolen)
    # The key id is unique: free it on the victim's row, put it and the ciphertexts on one's own.
    MemoryVersion.objects.filter(pk=stolen).update(key_id=uuid.uuid4())
    MemoryVersion.objects.filter(pk=own).update(key_id=key_id)
    write_raw("memoryapp_memoryversion", VERSION_COLUMNS, "id", own, texts)
    write_raw("memoryapp_memoryembedding", ENTRY_COLUMNS, "memory_id", own, entry)
    before = unreadable("memoryapp.MemoryVersion")
    with caplog.at_level(logging.ERROR):
        seen = everything_the_member_sees(attacker, attacker_agent)
    assert MARKER not in seen and "harmless" not in seen  # the copied row is hidden, not shown as either
    assert unreadable("memoryapp.MemoryVersion") > before
    assert any("does not open" in r.getMessage() for r in caplog.records) and not any(
        MARKER in r.getMessage() for r in caplog.records
    )


@pytest.mark.parametrize("across_workspaces", [False, True], ids=["same workspace", "other workspace"])
def test_re_owning_a_victims_rows_shows_nothing_of_them_to_the_new_owner(world, caplog, across_workspaces):
    victim = world.editor
    attacker = world.outsider if across_workspaces else world.owner
    attacker_agent = make_agent(attacker)
    agent_memory = remember(make_agent(victim), f"the {MARKER} salary")
    assistant, _ = add_assistant_memory(
        victim, kind="fact", topic="salary_topic", summary=f"salary is {MARKER}", details=[f"{MARKER} detail"]
    )
    moved = [agent_memory, assistant.pk]
    MemoryVersion.objects.filter(pk__in=moved).update(member_id=attacker.pk, workspace_id=attacker.workspace_id)
    before = {model: unreadable(model) for model in ("memoryapp.MemoryVersion", "memoryapp.MemoryEmbedding")}
    with caplog.at_level(logging.ERROR):
        seen = everything_the_member_sees(attacker, attacker_agent)
    assert MARKER not in seen and "salary" not in seen
    assert unreadable("memoryapp.MemoryVersion") > before["memoryapp.MemoryVersion"]
    assert not any(MARKER in r.getMessage() for r in caplog.records)
    # Opened directly, the moved rows and their index entries are still refused (not only by the API).
    assert list(MemoryVersion.objects.filter(pk__in=moved)) == []
    assert list(MemoryEmbedding.objects.filter(memory_id__in=moved)) == []
    assert unreadable("memoryapp.MemoryEmbedding") > before["memoryapp.MemoryEmbedding"]


def test_a_re_owned_consolidation_input_does_not_open(world):
    consolidation = Consolidation.objects.create(
        workspace=world.workspace,
        member=world.editor,
        conversation_id="c1",
        messages=[{"role": "user", "content": f"say {MARKER}"}],
        message_count=1,
    )
    Consolidation.objects.filter(pk=consolidation.pk).update(member_id=world.owner.pk)
    assert list(Consolidation.objects.filter(pk=consolidation.pk)) == []
    flagged = Consolidation.objects.keep_unreadable().get(pk=consolidation.pk)
    assert sealing.is_unreadable(flagged) and flagged.messages is None


def test_the_owners_own_rows_still_read_after_the_moves(world):
    agent = make_agent(world.editor)
    pk = remember(agent, f"kept {MARKER} note")
    assert MemoryVersion.objects.get(pk=pk).text == f"kept {MARKER} note"
    assert MemoryEmbedding.objects.get(memory_id=pk).terms
    assert [int(m["id"]) for m in agent.recall(query=MARKER, limit=5).json()["memories"]] == [pk]


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    owner=st.tuples(st.integers(1, 10**9), st.integers(1, 10**9)),
    other=st.tuples(st.integers(1, 10**9), st.one_of(st.none(), st.integers(1, 10**9))),
    text=st.text(max_size=200),
)
def test_a_ciphertext_opens_only_for_the_owner_it_was_sealed_for(owner, other, text):
    cipher = crypto.DataKeyCipher(crypto.new_data_key())
    key_id = uuid.uuid4()
    sealed = crypto.seal(cipher, text.encode(), crypto.field_aad("memoryapp_memoryversion", owner, key_id, "text"))
    assert (
        crypto.open_sealed(cipher, sealed, crypto.field_aad("memoryapp_memoryversion", owner, key_id, "text")).decode()
        == text
    )
    for moved in {(other[0], owner[1]), (owner[0], other[1]), other} - {owner}:
        with pytest.raises(crypto.SealError):
            crypto.open_sealed(cipher, sealed, crypto.field_aad("memoryapp_memoryversion", moved, key_id, "text"))


def test_a_re_owned_row_stripped_of_its_key_id_is_no_plaintext_and_no_500(world, caplog):
    """Without a key id a row reads as one stored before encryption; its ciphertext is then no
    UTF-8 text: hidden as corrupt, never a 500, never shown as text."""
    attacker = world.owner
    attacker_agent = make_agent(attacker)
    stolen = remember(make_agent(world.editor), f"the {MARKER} address")
    MemoryVersion.objects.filter(pk=stolen).update(member_id=attacker.pk, key_id=None)
    with caplog.at_level(logging.ERROR):
        seen = everything_the_member_sees(attacker, attacker_agent)
    assert MARKER not in seen and "address" not in seen
    assert list(MemoryVersion.objects.filter(pk=stolen)) == []
