"""Envelope encryption and crypto-erase (SPEC §8.2), tried like an attacker would.

What a stolen database holds (ciphertext only, no key), what moving or corrupting a ciphertext
yields (that memory hidden, counted, logged, never a 500 nor another memory's text), what an
erase leaves (no key; a receipt that says so), what a crash between the two databases leaves (the
sweep converges, the receipts tell the truth), and what a key rotation changes (nothing a reader
sees).

Every test runs twice: with the KEK in the key file, and with the KEK in a PKCS#11 token (SoftHSM2,
KEK_BACKEND=pkcs11), every data key wrapped and unwrapped inside the token. Left out of the token
run, because they are about the key file and MEMORY_KEK themselves: the two tests that configure
MEMORY_KEK (with a token it is refused at settings load; tests/erasure/test_pkcs11.py covers the
token's own rotation and a KEK missing from it).
"""

from __future__ import annotations

import base64
import logging
import secrets
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from credits.models import Consolidation
from memoryapp import crypto, keyring, metrics, sealing
from memoryapp.assistant import add_assistant_memory, list_assistant_memories
from memoryapp.keyring import KEYRING, DataKey, key_store
from memoryapp.models import MemoryEmbedding, MemoryVersion
from retention import erasure, keysweep, receipt_checks, receipts
from retention.models import DeletionReceipt, Operation
from tests.support import client_for, make_agent

MARKER = "quillfeatherzebra"

FILE_KEK_ONLY = {
    "test_a_key_encryption_key_missing_from_the_configuration_hides_rows_and_never_500s",
    "test_rotating_the_kek_rewraps_every_key_and_readers_see_no_change",
}


def pytest_generate_tests(metafunc):
    backends = ["file"] if metafunc.function.__name__ in FILE_KEK_ONLY else ["file", "pkcs11"]
    metafunc.parametrize("kek_backend", backends, indirect=True)


@pytest.fixture(autouse=True)
def kek_backend(request):
    """KEK_BACKEND=pkcs11, in the token run, for every test that reaches the database (the others
    need no KEK)."""
    if request.param == "pkcs11" and (
        "world" in request.fixturenames or "db" in request.fixturenames or request.node.get_closest_marker("django_db")
    ):
        request.getfixturevalue("token_kek")
        from memoryapp import kek_backends

        assert isinstance(keyring.kek_source(), kek_backends.Pkcs11Keks)
    return request.param


def raw_row(table: str, column: str, pk_column: str, pk: int) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE {pk_column} = %s", [pk])
        (value,) = cursor.fetchone()
    return bytes(value) if not isinstance(value, str) else value.encode()


def set_raw(table: str, column: str, pk_column: str, pk: int, value: bytes) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE {pk_column} = %s", [value, pk])


def unreadable_count(model: str, reason: str) -> float:
    return metrics.SEALED_UNREADABLE.labels(model, reason)._value.get()


def remember(agent, text: str, **extra) -> int:
    response = agent.remember(namespace="notes", text=text, **extra)
    assert response.status_code == 201, response.json()
    return int(response.json()["memory"]["id"])


def listed_ids(agent) -> set[int]:
    response = agent.list(limit=100)
    assert response.status_code == 200
    return {int(m["id"]) for m in response.json()["memories"]}


def recalled(agent, query: str) -> list[dict]:
    response = agent.recall(query=query, limit=20)
    assert response.status_code == 200, response.json()
    return response.json()["memories"]


# --- at rest ---------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_key_store_is_another_database_holding_only_the_keys():
    assert connections[KEYRING].settings_dict["NAME"] != connections[DEFAULT_DB_ALIAS].settings_dict["NAME"]
    assert DataKey._meta.db_table in connections[KEYRING].introspection.table_names()
    assert DataKey._meta.db_table not in connection.introspection.table_names()
    assert MemoryVersion._meta.db_table not in connections[KEYRING].introspection.table_names()


def test_every_content_field_is_stored_only_as_ciphertext(world):
    agent = make_agent(world.editor)
    pk = remember(agent, f"The {MARKER} prefers tea at four")
    version, _ = add_assistant_memory(
        world.editor, kind="preference", topic="drinks", summary=f"Likes {MARKER} tea", details=[f"{MARKER} detail"]
    )
    consolidation = Consolidation.objects.create(
        workspace=world.workspace,
        member=world.editor,
        conversation_id="c1",
        messages=[{"role": "user", "content": f"say {MARKER}"}],
        message_count=1,
    )
    stored = [
        *(
            raw_row("memoryapp_memoryversion", column, "id", row)
            for row in (pk, version.pk)
            for column in ("text", "details", "kind")
        ),
        *(
            raw_row("memoryapp_memoryembedding", column, "memory_id", row)
            for row in (pk, version.pk)
            for column in ("terms", "vector")
        ),
        raw_row("retention_consolidation", "messages", "id", consolidation.pk),
    ]
    for value in stored:
        assert value[:1] == crypto.FORMAT and len(value) >= crypto.OVERHEAD
        assert MARKER.encode() not in value and b"preference" not in value and b"tea" not in value
    # ...and every one of them opens for the reader, as plain values.
    version = MemoryVersion.objects.get(pk=version.pk)
    assert (version.text, version.kind, version.details) == (f"Likes {MARKER} tea", "preference", f"{MARKER} detail")
    assert Consolidation.objects.get(pk=consolidation.pk).messages == [{"role": "user", "content": f"say {MARKER}"}]
    assert (
        MARKER[:8] in " ".join(MemoryEmbedding.objects.get(memory_id=pk).terms.split())
        or MemoryEmbedding.objects.get(memory_id=pk).terms
    )


def test_each_version_has_its_own_key_and_the_key_is_stored_wrapped(world):
    agent = make_agent(world.editor)
    ids = [remember(agent, f"note number {word}") for word in ("alpha", "beta", "gamma")]
    key_ids = list(MemoryVersion.objects.filter(pk__in=ids).values_list("key_id", flat=True))
    assert len(set(key_ids)) == 3 and None not in key_ids
    kek = keyring.key_encryption_keys()
    for key_id, wrapped in DataKey.objects.filter(pk__in=key_ids).values_list("key_id", "wrapped"):
        dek = kek.unwrap(key_id, kek.current_id, bytes(wrapped))
        assert len(dek) == 32 and dek not in bytes(wrapped)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=st.text(min_size=0, max_size=300),
    field=st.sampled_from(["text", "details", "kind"]),
    other=st.sampled_from(["text", "details", "kind"]),
)
def test_a_ciphertext_opens_only_under_its_own_row_and_field(text, field, other):
    cipher = crypto.DataKeyCipher(crypto.new_data_key())
    owner = (1, 2)
    key_id, elsewhere = uuid.uuid4(), uuid.uuid4()
    sealed = crypto.seal(cipher, text.encode(), crypto.field_aad("memoryapp_memoryversion", owner, key_id, field))
    assert (
        crypto.open_sealed(cipher, sealed, crypto.field_aad("memoryapp_memoryversion", owner, key_id, field)).decode()
        == text
    )
    with pytest.raises(crypto.SealError):
        crypto.open_sealed(cipher, sealed, crypto.field_aad("memoryapp_memoryversion", owner, elsewhere, field))
    with pytest.raises(crypto.SealError):
        crypto.open_sealed(cipher, sealed, crypto.field_aad("memoryapp_memoryembedding", owner, key_id, field))
    if other != field:
        with pytest.raises(crypto.SealError):
            crypto.open_sealed(cipher, sealed, crypto.field_aad("memoryapp_memoryversion", owner, key_id, other))


def test_content_cannot_be_written_by_update_nor_compared_in_a_filter(world):
    remember(make_agent(world.editor), "a plain note")
    with pytest.raises(TypeError, match="sealed"):
        MemoryVersion.objects.update(text="overwritten")
    with pytest.raises(TypeError, match="sealed"):
        MemoryEmbedding.objects.update(terms="x y")


# --- moved, corrupted, keyless rows: hidden, counted, never a 500 ---------------------------------
def test_a_ciphertext_moved_to_another_row_hides_that_row_and_never_shows_the_other_text(world, caplog):
    agent = make_agent(world.editor)
    secret = remember(agent, f"secret {MARKER} number one")
    victim = remember(agent, "harmless shopping list")
    set_raw("memoryapp_memoryversion", "text", "id", victim, raw_row("memoryapp_memoryversion", "text", "id", secret))
    before = unreadable_count("memoryapp.MemoryVersion", sealing.CORRUPT)
    with caplog.at_level(logging.ERROR):
        seen = listed_ids(agent)
        found = recalled(agent, MARKER)
    assert victim not in seen and secret in seen
    assert [int(m["id"]) for m in found] == [secret]
    assert all(MARKER not in m["text"] or int(m["id"]) == secret for m in found)
    assert unreadable_count("memoryapp.MemoryVersion", sealing.CORRUPT) > before
    assert any("does not open" in r.getMessage() for r in caplog.records) and not any(
        MARKER in r.getMessage() for r in caplog.records
    )


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(min_value=0, max_value=400), column=st.sampled_from(["text", "details", "kind"]))
def test_a_corrupted_byte_anywhere_hides_the_memory_on_every_surface(world, position, column):
    agent = make_agent(world.editor)
    pk = remember(agent, f"corruptible {MARKER} note")
    stored = bytearray(raw_row("memoryapp_memoryversion", column, "id", pk))
    stored[position % len(stored)] ^= 0x5A
    set_raw("memoryapp_memoryversion", column, "id", pk, bytes(stored))
    assert pk not in listed_ids(agent)
    assert all(int(m["id"]) != pk for m in recalled(agent, MARKER))
    member_api = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ask-history/agent-memories")
    assert member_api.status_code == 200 and all(int(m["id"]) != pk for m in member_api.json()["memories"])
    browser = Client()
    browser.force_login(world.editor.user)
    page = browser.get(f"/w/{world.workspace.pk}/what-bundata-remembers/")
    assert page.status_code == 200 and MARKER not in page.content.decode()
    MemoryVersion.objects.filter(pk=pk).delete()


def test_a_corrupted_index_entry_drops_the_candidate_from_recall(world):
    agent = make_agent(world.editor)
    pk = remember(agent, f"indexed {MARKER} note")
    stored = bytearray(raw_row("memoryapp_memoryembedding", "terms", "memory_id", pk))
    stored[-1] ^= 1
    set_raw("memoryapp_memoryembedding", "terms", "memory_id", pk, bytes(stored))
    before = unreadable_count("memoryapp.MemoryEmbedding", sealing.CORRUPT)
    assert recalled(agent, MARKER) == []
    assert unreadable_count("memoryapp.MemoryEmbedding", sealing.CORRUPT) == before + 1


def test_a_memory_whose_key_is_gone_reads_as_erased_everywhere(world):
    agent = make_agent(world.editor)
    pk = remember(agent, f"keyless {MARKER} note")
    assistant, _ = add_assistant_memory(world.editor, kind="fact", topic="keyless_topic", summary=f"keyless {MARKER}")
    key_store().delete_many(MemoryVersion.objects.filter(pk__in=[pk, assistant.pk]).values_list("key_id", flat=True))
    assert pk not in listed_ids(agent) and recalled(agent, MARKER) == []
    assert agent.forget(memoryId=str(pk)).status_code == 404  # as erased: not found
    assert all(m["id"] != str(assistant.pk) for m in list_assistant_memories(world.editor)["memories"])
    export = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/me/export")
    assert (
        export.status_code == 200
        and MARKER
        not in b"".join(export.streaming_content if hasattr(export, "streaming_content") else [export.content]).decode()
    )


def test_a_key_encryption_key_missing_from_the_configuration_hides_rows_and_never_500s(world, settings):
    agent = make_agent(world.editor)
    pk = remember(agent, f"old kek {MARKER}")
    settings.MEMORY_KEK = base64.b64encode(secrets.token_bytes(32)).decode()
    before = unreadable_count("memoryapp.MemoryVersion", sealing.BAD_KEY)
    assert pk not in listed_ids(agent)
    assert unreadable_count("memoryapp.MemoryVersion", sealing.BAD_KEY) > before


# --- the cost of reading: one key-store query ------------------------------------------------------
def test_recall_of_many_candidates_asks_the_key_store_once(world, monkeypatch):
    agent = make_agent(world.editor)
    for i in range(40):
        remember(agent, f"candidate {MARKER} {i} about shipping")
    calls: list[int] = []
    original = keyring.DatabaseKeyStore.get_many

    def counted(self, key_ids):
        key_ids = list(key_ids)
        calls.append(len(key_ids))
        return original(self, key_ids)

    monkeypatch.setattr(keyring.DatabaseKeyStore, "get_many", counted)
    found = recalled(agent, f"{MARKER} shipping")
    assert found and calls == [40]  # one round trip for every candidate, and the results reuse it
    calls.clear()
    assert len(listed_ids(agent)) == 40
    assert len(calls) <= 2  # one per page batch


def test_no_unwrapped_key_outlives_the_erase_in_a_later_read(world):
    """No process-wide cache of unwrapped keys: a read after the erase asks the key store again."""
    agent = make_agent(world.editor)
    pk = remember(agent, f"cached {MARKER}")
    assert pk in listed_ids(agent)
    key_store().delete_many([MemoryVersion.objects.get(pk=pk).key_id])
    assert pk not in listed_ids(agent)


# --- erase destroys the keys ----------------------------------------------------------------------
def test_forget_destroys_the_versions_keys_and_the_receipt_says_so(world, settings):
    settings.BACKUP_RETENTION_DAYS = 7
    agent = make_agent(world.editor)
    response = agent.remember(namespace="notes", key="k", text="first")
    agent.remember(namespace="notes", key="k", text="second")
    pk = int(response.json()["memory"]["id"])
    key_ids = list(MemoryVersion.objects.filter(key="k").values_list("key_id", flat=True))
    answer = agent.forget(memoryId=str(pk))
    assert answer.status_code == 200
    assert not DataKey.objects.filter(pk__in=key_ids).exists()
    receipt = DeletionReceipt.objects.get(pk=answer.json()["receiptId"])
    assert receipt.manifest["keysDestroyed"] == 2 and sorted(receipt.manifest["dataKeyIds"]) == sorted(
        str(k) for k in key_ids
    )
    assert receipt.verification["clean"] and receipt.verification["remaining"]["data_key"] == 0
    assert (
        "ciphertext only" in receipt.residual["backups"]["statement"]
        and receipt.residual["keyring"]["retentionDays"] == 0
    )
    assert receipt_checks.verify_chains([world.workspace.pk])["workspaces"][0]["intact"]


def test_the_receipt_states_the_keyring_backup_window_when_there_is_one(world, settings):
    settings.KEYRING_BACKUP_RETENTION_DAYS = 3
    agent = make_agent(world.editor)
    answer = agent.forget(memoryId=str(remember(agent, "kept in a key backup")))
    receipt = DeletionReceipt.objects.get(pk=answer.json()["receiptId"])
    window = receipt.residual["keyring"]
    assert window["retentionDays"] == 3 and window["until"] == (receipt.purged_at + timedelta(days=3)).isoformat()
    assert "would read these memories" in window["statement"]


def test_a_failed_key_deletion_is_not_reported_clean_and_the_sweep_repairs_it(world, monkeypatch):
    agent = make_agent(world.editor)
    pk = remember(agent, f"stubborn {MARKER}")
    key_id = MemoryVersion.objects.get(pk=pk).key_id

    def down(self, key_ids):
        raise keyring.DataKey.DoesNotExist("key store unreachable")  # any failure of the other database

    with monkeypatch.context() as patch:
        patch.setattr(keyring.DatabaseKeyStore, "destroy_many", down)
        answer = agent.forget(memoryId=str(pk))
    assert answer.status_code == 200  # the rows are gone: the member's forget is done
    receipt = DeletionReceipt.objects.get(pk=answer.json()["receiptId"])
    assert (
        receipt.manifest["keysDestroyed"] == 0
        and receipt.verification["clean"] is False
        and receipt.verification["remaining"]["data_key"] == 1
    )
    assert DataKey.objects.filter(pk=key_id).exists()

    assert (
        keysweep.sweep_keyring(now=timezone.now())["orphanedKeysDestroyed"] == 0
    )  # too young: could be an INSERT in flight
    spares = keyring.spare_keys().count(sealing.owner_label(MemoryVersion))  # stored, never handed out: orphans too
    result = keysweep.sweep_keyring(now=timezone.now() + keysweep.KEY_GRACE + timedelta(minutes=1))
    assert result["orphanedKeysDestroyed"] == 1 + spares and result["receiptsReverified"] == 1
    assert not DataKey.objects.filter(pk=key_id).exists()
    receipt.refresh_from_db()
    assert receipt.verification["clean"] is True and receipt.verifications[-1]["trigger"] == "reverification"
    assert receipt_checks.verify_chains([world.workspace.pk])["workspaces"][0]["intact"]


def test_a_crash_after_the_keys_are_destroyed_leaves_no_readable_orphan_and_the_sweep_erases_it(world, monkeypatch):
    agent = make_agent(world.editor)
    pk = remember(agent, f"interrupted {MARKER}")
    key_id = MemoryVersion.objects.get(pk=pk).key_id

    def crash(**fields):
        raise RuntimeError("process killed between the key deletion and the commit")

    with monkeypatch.context() as patch:
        patch.setattr(receipts, "append", crash)
        with pytest.raises(RuntimeError):
            erasure.erase_memories(
                [pk],
                operation=Operation.FORGET,
                workspace_id=world.workspace.pk,
                member_id=world.editor.pk,
                actor_label="test",
            )
    # The data rolled back, the key did not: the row is unreadable everywhere, and reads as erased.
    assert MemoryVersion.objects.filter(pk=pk).values_list("pk", flat=True).first() == pk
    assert not DataKey.objects.filter(pk=key_id).exists()
    assert not DeletionReceipt.objects.exists()  # no receipt claims anything
    assert pk not in listed_ids(agent) and recalled(agent, MARKER) == []

    result = keysweep.sweep_keyring()
    assert result["versionsErased"] == 1 and result["receipts"] == 1
    receipt = DeletionReceipt.objects.get()
    assert receipt.operation == Operation.KEY_SWEEP and receipt.memory_version_ids == [pk]
    assert receipt.manifest["keysDestroyed"] == 0 and receipt.manifest["dataKeyIds"] == [
        str(key_id)
    ]  # destroyed before, and it says so
    assert receipt.verification["clean"] is True
    assert keysweep.sweep_keyring() == {
        "orphanedKeysDestroyed": 0,
        "versionsErased": 0,
        "receipts": 0,
        "consolidationInputsPurged": 0,
        "receiptsReverified": 0,
        "nameKeysDestroyed": 0,
    }


def test_a_crash_before_the_keys_are_destroyed_changes_nothing(world, monkeypatch):
    agent = make_agent(world.editor)
    pk = remember(agent, f"untouched {MARKER}")

    def crash(*args, **kwargs):
        raise RuntimeError("process killed after the data delete, before the key deletion")

    with monkeypatch.context() as patch:
        patch.setattr(erasure, "destroy_keys", crash)
        with pytest.raises(RuntimeError):
            erasure.erase_memories(
                [pk],
                operation=Operation.FORGET,
                workspace_id=world.workspace.pk,
                member_id=world.editor.pk,
                actor_label="test",
            )
    assert pk in listed_ids(agent)  # still there, still readable: the erase simply did not happen
    assert keysweep.sweep_keyring(now=timezone.now() + timedelta(days=1))["versionsErased"] == 0


def test_a_remember_rolled_back_after_its_key_was_stored_leaves_a_key_the_sweep_destroys(world, monkeypatch):
    from memoryapp.models import Citation

    agent = make_agent(world.editor)
    keys_before = DataKey.objects.count()
    monkeypatch.setattr(
        Citation.objects, "bulk_create", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash mid-remember"))
    )
    with pytest.raises(RuntimeError):
        agent.client.raise_request_exception = True
        agent.remember(namespace="notes", text="never committed")
    batch = 1 + keyring.spare_keys().count(
        sealing.owner_label(MemoryVersion)
    )  # the key taken, and the spares stored with it
    assert not MemoryVersion.objects.exists() and DataKey.objects.count() == keys_before + batch
    assert (
        keysweep.sweep_keyring(now=timezone.now() + keysweep.KEY_GRACE + timedelta(seconds=1))["orphanedKeysDestroyed"]
        == batch
    )
    assert DataKey.objects.count() == keys_before


def test_a_finished_consolidation_destroys_its_input_key(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        consolidation = Consolidation.objects.create(
            workspace=world.workspace,
            member=world.editor,
            conversation_id="c",
            messages=[{"role": "user", "content": "hello"}],
            message_count=1,
        )
    key_id = consolidation.key_id
    assert DataKey.objects.filter(pk=key_id).exists()
    from memoryapp.consolidation import purge_input

    with django_capture_on_commit_callbacks(execute=True):
        purge_input(Consolidation.objects.filter(pk=consolidation.pk), status="done")
    assert not DataKey.objects.filter(pk=key_id).exists()
    assert Consolidation.objects.get(pk=consolidation.pk).messages is None


# --- rotation and legacy rows ---------------------------------------------------------------------
def test_rotating_the_kek_rewraps_every_key_and_readers_see_no_change(world, settings):
    agent = make_agent(world.editor)
    ids = {remember(agent, f"rotated {i}") for i in range(5)}
    old = base64.b64encode(keyring.key_encryption_keys().current).decode()  # the key file's (or MEMORY_KEK's)
    settings.MEMORY_KEK, settings.RETIRED_KEKS = base64.b64encode(secrets.token_bytes(32)).decode(), [old]
    assert listed_ids(agent) == ids  # the retired KEK still unwraps
    call_command("rotate_kek", "--json", "--chunk", "2", stdout=__import__("io").StringIO())
    assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {
        crypto.kek_id(crypto.decode_kek(settings.MEMORY_KEK))
    }
    settings.RETIRED_KEKS = []
    assert listed_ids(agent) == ids


def plant_legacy(world, text: str) -> int:
    """A version stored the way it was before encryption: plaintext columns, no key id."""
    version = MemoryVersion.objects.create(
        workspace=world.workspace, member=world.editor, namespace="notes", text="placeholder"
    )
    entry_terms = f"legacy {text}".encode()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memoryapp_memoryversion SET key_id = NULL, text = %s, details = %s, kind = %s WHERE id = %s",
            [text.encode(), b"", b"fact", version.pk],
        )
        cursor.execute(
            "INSERT INTO memoryapp_memoryembedding (memory_id, embedder_id, dim, vector, terms, terms_format) VALUES "
            "(%s, %s, %s, %s, %s, %s)",
            [version.pk, "hashing", 1, b"\0\0\x80?", entry_terms, "t1"],
        )
    key_store().delete_many([version.key_id])
    return version.pk


def test_encrypt_memories_seals_legacy_rows_once_and_they_read_the_same(world):
    import io
    import json

    pks = [plant_legacy(world, f"legacy {MARKER} {i}") for i in range(7)]
    before = {v.pk: (v.text, v.kind) for v in MemoryVersion.objects.filter(pk__in=pks)}
    assert before[pks[0]] == (f"legacy {MARKER} 0", "fact")  # legacy plaintext still reads
    out = io.StringIO()
    call_command("encrypt_memories", "--json", "--chunk", "3", stdout=out)
    assert json.loads(out.getvalue()) == {"memoryVersions": 7, "consolidationInputs": 0}
    assert {v.pk: (v.text, v.kind) for v in MemoryVersion.objects.filter(pk__in=pks)} == before
    for pk in pks:
        assert MARKER.encode() not in raw_row("memoryapp_memoryversion", "text", "id", pk)
        assert MARKER.encode() not in raw_row("memoryapp_memoryembedding", "terms", "memory_id", pk)
    assert MemoryEmbedding.objects.get(memory_id=pks[0]).terms == f"legacy legacy {MARKER} 0"
    out = io.StringIO()
    call_command("encrypt_memories", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"memoryVersions": 0, "consolidationInputs": 0}


def test_erasing_a_legacy_row_says_its_backups_keep_it_readable(world):
    pk = plant_legacy(world, "old plaintext")
    receipt = erasure.erase_memories(
        [pk], operation=Operation.FORGET, workspace_id=world.workspace.pk, member_id=world.editor.pk, actor_label="test"
    )
    assert receipt.manifest["keysDestroyed"] == 0 and receipt.residual["backups"]["content"] == "partly_unsealed"


def test_an_orphaned_input_key_stored_before_the_credits_move_is_still_destroyed(world):
    """Consolidation moved from retention to credits (issue 23 step 4); the keys its inputs were
    sealed under before the move say `retention.consolidation` in the key store, which no
    migration rewrites. The sweep still finds the orphaned ones and keeps the live ones."""
    assert sealing.owner_label(Consolidation) == "credits.consolidation"
    live = Consolidation.objects.create(
        workspace=world.workspace,
        member=world.editor,
        conversation_id="c",
        messages=[{"role": "user", "content": "hello"}],
        message_count=1,
    )
    orphan = uuid.uuid4()
    key_store().put({orphan: crypto.new_data_key()}, owner="retention.consolidation")
    DataKey.objects.filter(pk=live.key_id).update(owner="retention.consolidation")  # sealed before the move
    spares = keyring.spare_keys().count(
        sealing.owner_label(Consolidation)
    )  # stored with the live one's key, never handed out
    result = keysweep.sweep_keyring(now=timezone.now() + keysweep.KEY_GRACE + timedelta(seconds=1))
    assert result["orphanedKeysDestroyed"] == 1 + spares
    assert not DataKey.objects.filter(pk=orphan).exists()
    assert Consolidation.objects.get(pk=live.pk).messages == [{"role": "user", "content": "hello"}]
