"""Proof that looks at the disk (issue 33 row 1, Build 1 and 3).

On PostgreSQL a forgotten memory's destroyed data key stays in the key table's heap file as a dead
tuple: after a CHECKPOINT its wrapped bytes are read from the file and, with the KEK, unwrap, and
the memory's ciphertext opens. The receipt says so (residualUntil), `verify_forgetting --backup
--receipt` reports the copy as residual, and after the scheduled rotation destroys the KEK the same
bytes open with no KEK that exists: the window is closed. On SQLite (secure_delete, WAL truncated)
no copy is left at all. The search is by fingerprint (prefix + SHA-256), tested on its own too.
"""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import string
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.core.management import call_command
from django.db import connection, connections
from django.utils import timezone

from memoryapp import encryption, keyring, sealing
from memoryapp.crypto import SealError
from memoryapp.keyring import KEYRING, KekRecord, fingerprint
from memoryapp.models import MemoryVersion
from retention import key_residue
from retention.models import DeletionReceipt
from tests.erasure.support import restart
from tests.support import make_agent

pytestmark = pytest.mark.django_db(transaction=True)  # CHECKPOINT and the files see only what is committed


def test_the_search_finds_whole_copies_at_any_offset_and_nothing_else(tmp_path):
    wrapped = [b"\x01" + secrets.token_bytes(60) for _ in range(3)]
    blob = bytearray(secrets.token_bytes(10_000))
    blob[17:78] = wrapped[0]  # an odd offset
    blob[5000:5061] = wrapped[0]  # twice
    blob[9000:9040] = wrapped[1][:40]  # a torn copy: the prefix without the rest
    path = tmp_path / "file"
    path.write_bytes(bytes(blob))
    (tmp_path / "empty").write_bytes(b"")
    hits = key_residue.find_wrapped([path, tmp_path / "empty", tmp_path / "missing"], [fingerprint(w) for w in wrapped])
    assert sorted(offset for _, offset, _ in hits) == [17, 5000]
    assert all(found == wrapped[0] for _, _, found in hits)
    kept = fingerprint(wrapped[2])
    assert set(kept) == {"prefix", "sha256", "length"} and bytes.fromhex(kept["prefix"]) == wrapped[2][:13]
    assert kept["sha256"] == hashlib.sha256(wrapped[2]).hexdigest()  # the tail (ciphertext, tag) is not kept


def remember_and_forget(world) -> tuple[DeletionReceipt, MemoryVersion, str]:
    agent = make_agent(world.editor)
    # letters only: a hex token with a long run of digits is read as a long number and masked
    # (about 1 in 9 of token_hex(6)), and the test needs the text to come back as written
    text = f"the safe code is {''.join(secrets.choice(string.ascii_lowercase) for _ in range(12))}"
    answer = agent.remember(namespace="vault", text=text)
    assert answer.status_code == 201, answer.json()
    version = MemoryVersion.objects.get(pk=int(answer.json()["memory"]["id"]))
    sealed = MemoryVersion.objects.filter(pk=version.pk).values_list("text", flat=True).get()  # the stored ciphertext
    forgotten = agent.forget(memoryId=str(version.pk))
    assert forgotten.status_code == 200
    version.sealed_text = bytes(sealed.raw)
    return DeletionReceipt.objects.get(pk=forgotten.json()["receiptId"]), version, text


def inspect_by_command(world, receipt: DeletionReceipt) -> dict:
    out = io.StringIO()
    call_command(
        "verify_forgetting",
        "--workspace",
        str(world.workspace.pk),
        "--backup",
        "--receipt",
        str(receipt.pk),
        "--json",
        stdout=out,
    )
    return json.loads(out.getvalue())


def opens(version: MemoryVersion, wrapped: bytes) -> str | None:
    """What the erased memory's text reads with this wrapped key and every KEK that exists now."""
    keks = keyring.key_encryption_keys()
    for kek in (keks.current, *keks.retired):
        candidate = type(keks)(kek)
        try:
            dek = candidate.unwrap(version.key_id, candidate.current_id, wrapped)
        except SealError:
            continue
        opened = sealing.open_values(
            MemoryVersion,
            version.key_id,
            (version.workspace_id, version.member_id),
            {version.key_id: AESGCM(dek)},
            {"text": version.sealed_text},
        )
        return opened["text"]
    return None


def test_the_receipt_names_residual_until_and_the_window_closes_at_the_rotation(world, key_file, settings):
    """Issue 33 row 1, reproduced on PostgreSQL, and its bound on both backends."""
    settings.KEYRING_VACUUM_AFTER_ERASE = False  # the dead tuple as the issue found it (the vacuum only shortens this)
    receipt, version, text = remember_and_forget(world)
    kek = keyring.key_encryption_keys().current_id
    schedule = encryption.kek_schedule()
    assert receipt.residual["kek"]["kekIds"] == [kek] and len(receipt.residual["kek"]["wrappedKeys"]) == 1
    assert (
        receipt.residual_until == schedule.destroyed_by(receipt.purged_at)
        and receipt.residual_until > receipt.purged_at
    )
    assert "residualUntil" in receipt.residual["kek"][
        "statement"
    ] and "can no longer be read from any copy" not in json.dumps(receipt.residual)
    assert receipt.residual_json()["residualOpen"] is True

    files = key_residue.key_store_files()
    if files.not_inspectable:
        pytest.skip(
            f"the key store's files cannot be read here, so the disk proof did not run: {files.not_inspectable}"
        )  # unexpected: fails CI
    before = inspect_by_command(world, receipt)
    hits = key_residue.find_wrapped(files.paths, receipt.residual["kek"]["wrappedKeys"])
    if connections[KEYRING].vendor == "postgresql":
        # Row 1: the destroyed key is still in the heap file after CHECKPOINT, and with the KEK it opens the memory.
        assert (
            hits
            and before["found"] >= 1
            and before["unwrapsNow"] >= 1
            and before["state"] == "residual"
            and before["clean"]
        )
        assert opens(version, hits[0][2]) == text
    else:
        assert not hits and before["found"] == 0 and before["state"] == "none"  # secure_delete and the truncated WAL

    result = encryption.scheduled_rotation(
        now=timezone.now() + timedelta(hours=settings.KEK_ROTATION_HOURS + 1), settle=0
    )
    assert result["rotation"] == "rotated" and result["destroyedKeks"] == [kek]
    restart()
    assert KekRecord.objects.get(kek_id=kek).destroyed_at is not None
    after = inspect_by_command(world, receipt)
    assert after["unwrapsNow"] == 0 and after["residualClosedAt"] is not None and after["clean"]
    assert after["state"] in ("closed", "none")
    for _, _, wrapped in hits:  # the same bytes, still on disk or not: no KEK that exists opens them
        assert opens(version, wrapped) is None
    receipt.refresh_from_db()
    assert receipt.residual_json()["residualOpen"] is False


def test_a_copy_that_still_unwraps_after_residual_until_breaks_the_promise(world, key_file, settings):
    settings.KEYRING_VACUUM_AFTER_ERASE = False
    receipt, _, _ = remember_and_forget(world)
    files = key_residue.key_store_files()
    if files.not_inspectable:
        pytest.skip(f"the key store's files cannot be read here: {files.not_inspectable}")
    wrapped = receipt.residual["kek"]["wrappedKeys"]
    if not key_residue.find_wrapped(files.paths, wrapped):
        assert connection.vendor == "sqlite"
        pytest.skip("backend: SQLite leaves no copy of a destroyed key to find (secure_delete)")
    late = key_residue.inspect_receipt(receipt, now=receipt.residual_until + timedelta(minutes=1))
    assert late["state"] == "overdue" and "rotation is late" in late["problem"]


def test_rotation_off_names_no_instant_and_says_why(world, key_file, settings):
    settings.KEK_ROTATION_HOURS = 0
    receipt, _, _ = remember_and_forget(world)
    assert (
        receipt.residual_until is None
        and receipt.residual["kek"]["until"] is None
        and receipt.residual["kek"]["state"] == "off"
    )
    assert "KEK_ROTATION_HOURS is 0" in receipt.residual["kek"]["statement"]
    assert receipt.residual_json() == {"residualUntil": None, "residualClosedAt": None, "residualOpen": True}


def test_the_key_table_is_vacuumed_after_an_erase_on_postgresql_only(world, key_file, settings, monkeypatch):
    calls = []
    original = keyring.DatabaseKeyStore.vacuum
    monkeypatch.setattr(keyring.DatabaseKeyStore, "vacuum", lambda self: calls.append(1) or original(self))
    remember_and_forget(world)
    assert len(calls) == (1 if connections[KEYRING].vendor == "postgresql" else 0)
    assert keyring.key_store().vacuum() is (connections[KEYRING].vendor == "postgresql")


def test_a_key_store_on_another_machine_is_reported_not_inspectable(settings):
    if connections[KEYRING].vendor != "postgresql":
        pytest.skip("backend: the remote-server case is PostgreSQL's")
    connections[KEYRING].settings_dict["HOST"], host = (
        "keys.example.com",
        connections[KEYRING].settings_dict.get("HOST"),
    )
    try:
        files = key_residue.key_store_files()
    finally:
        connections[KEYRING].settings_dict["HOST"] = host
    assert (
        files.paths == [] and "not inspectable" in files.not_inspectable and "keys.example.com" in files.not_inspectable
    )


def test_the_heap_file_path_is_the_key_tables(settings):
    files = key_residue.key_store_files()
    assert files.not_inspectable is None, files.not_inspectable
    if connections[KEYRING].vendor == "sqlite":
        assert files.paths[0] == Path(connections[KEYRING].settings_dict["NAME"])
    else:
        assert files.paths and all(p.is_file() for p in files.paths) and "base" in str(files.paths[0])
