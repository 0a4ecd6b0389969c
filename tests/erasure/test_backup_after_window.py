"""Issue 33 "Done when": an attacker holding the data backup and the key-store backup, both taken
before an erase, reads nothing of the erased memory after `residualUntil`, and the receipt says so.

A memory is remembered, the data's database and the key store are backed up the way operators do
(`BackupProof.back_up`: SQLite's backup API, PostgreSQL's `pg_dump -Fc`), the memory is forgotten.
Before the scheduled KEK rotation the two backups, restored, DO give the text back with a KEK that
exists (the window is real, and this test can fail); the receipt names a residualUntil still ahead
and is open. The rotation at its due instant destroys the KEK that wrapped the erased key; the same
backups, restored again, give nothing with any KEK that exists (current or retired), although the
ciphertext and the wrapped key are both still in them; the receipt is closed, no later than its
residualUntil. On both backends.
"""

from __future__ import annotations

import io
import json
import secrets
import sqlite3
import string
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from core import backends
from memoryapp import crypto, encryption, kek, keyring, sealing
from memoryapp.crypto import SealError
from memoryapp.keyring import KEYRING, DataKey, KekRecord, fingerprint
from memoryapp.models import MemoryVersion
from retention import key_residue
from retention.backup_proof import BackupProof
from retention.models import DeletionReceipt
from tests.support import make_agent

pytestmark = pytest.mark.django_db(transaction=True)  # a backup sees only what is committed


@pytest.fixture
def key_file(settings, tmp_path) -> Path:
    """The embedded default's KEK, in a file of this test's own (MEMORY_KEK unset): the one the
    scheduled rotation replaces and destroys."""
    settings.MEMORY_KEK, settings.RETIRED_KEKS, settings.MEMORY_KEK_FILE = "", [], tmp_path / "memory_kek"
    backends.forget("KEK_BACKEND")
    yield settings.MEMORY_KEK_FILE
    backends.forget("KEK_BACKEND")


def every_kek_that_exists() -> list[Any]:
    """Every KEK an attacker with this deployment's disks could use now: the current and any retired one."""
    backends.forget("KEK_BACKEND")  # as a new process reads them, not as this one remembers them
    keks = keyring.key_encryption_keys()
    return [type(keks)(k) for k in (keks.current, *keks.retired)]


def read_from_backups(
    proof: BackupProof, data_backup: Path, keyring_backup: Path, memory_id: int, label: str
) -> dict[str, Any]:
    """The attacker's try: restore both backups, take the memory's sealed text from the data backup
    and its wrapped data key from the key-store backup, unwrap it with every KEK that exists and open."""
    databases = []
    try:
        data = proof.restore(DEFAULT_DB_ALIAS, data_backup, f"d{label}")
        databases.append(data)
        row = proof._one(
            data,
            f"SELECT key_id, workspace_id, member_id, text FROM {MemoryVersion._meta.db_table} WHERE id = %s",
            [memory_id],
        )
        assert row is not None, "the data backup lacks the memory: it was not taken before the erase and proves nothing"
        key_id = row[0] if isinstance(row[0], UUID) else UUID(str(row[0]))
        sealed = bytes(row[3])
        keys = proof.restore(KEYRING, keyring_backup, f"k{label}")
        databases.append(keys)
        key_param = key_id.hex if isinstance(keys, sqlite3.Connection) else key_id
        key_row = proof._one(
            keys, f"SELECT wrapped_by, wrapped FROM {DataKey._meta.db_table} WHERE key_id = %s", [key_param]
        )
        assert key_row is not None, (
            "the key-store backup lacks the data key: it was not taken before the erase and proves nothing"
        )
        wrapped = bytes(key_row[1])
        for candidate in every_kek_that_exists():
            try:
                dek = candidate.unwrap(key_id, candidate.current_id, wrapped)
            except SealError:
                continue
            opened = sealing.open_values(
                MemoryVersion, key_id, (row[1], row[2]), {key_id: AESGCM(dek)}, {"text": sealed}
            )
            return {
                "wrappedBy": key_row[0],
                "wrapped": wrapped,
                "sealed": sealed,
                "text": opened["text"],
                "kek": candidate.current_id,
            }
        return {"wrappedBy": key_row[0], "wrapped": wrapped, "sealed": sealed, "text": None, "kek": None}
    finally:
        for db in databases:
            db.close()


def verify_receipt(world, receipt: DeletionReceipt) -> dict:
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


def test_both_backups_restored_after_residual_until_read_nothing_and_the_receipt_says_so(
    world, key_file, settings, tmp_path
):
    settings.KEYRING_VACUUM_AFTER_ERASE = False  # the worst case: the dead tuple left on PostgreSQL too
    agent = make_agent(world.editor)
    # letters: masking keeps them
    text = f"the blue kite is named {''.join(secrets.choice(string.ascii_lowercase) for _ in range(16))}"
    answer = agent.remember(namespace="vault", text=text)
    assert answer.status_code == 201, answer.json()
    memory_id = int(answer.json()["memory"]["id"])
    erased_kek = keyring.key_encryption_keys().current_id

    proof = BackupProof(world.workspace, world.editor)
    data_backup, keyring_backup = tmp_path / "data.backup", tmp_path / "keyring.backup"
    try:
        proof.back_up(DEFAULT_DB_ALIAS, data_backup)
        proof.back_up(KEYRING, keyring_backup)
        forgotten = agent.forget(memoryId=str(memory_id))
        assert forgotten.status_code == 200, forgotten.json()
        receipt = DeletionReceipt.objects.get(pk=forgotten.json()["receiptId"])
        assert not DataKey.objects.filter(wrapped_by=erased_kek, key_id__in=receipt.manifest["dataKeyIds"]).exists()

        # (a) Inside the window: the backups read, the receipt says the window is open until residualUntil.
        before = read_from_backups(proof, data_backup, keyring_backup, memory_id, "a")
        assert before["text"] == text and before["kek"] == erased_kek == before["wrappedBy"]
        assert text.encode() not in before["sealed"]  # the backup itself holds ciphertext only
        assert (
            fingerprint(before["wrapped"]) in receipt.residual["kek"]["wrappedKeys"]
        )  # the receipt covers the backup's copy
        assert receipt.residual["kek"]["kekIds"] == [erased_kek]
        assert receipt.residual_until is not None and receipt.residual_until > timezone.now()
        assert receipt.residual_json() == {
            "residualUntil": receipt.residual_json()["residualUntil"],
            "residualClosedAt": None,
            "residualOpen": True,
        }
        open_report = verify_receipt(world, receipt)
        assert open_report["residualClosedAt"] is None and open_report["clean"]
        # PostgreSQL keeps the destroyed key as a dead tuple (residual); SQLite's secure_delete keeps none.
        assert open_report["state"] == ("residual" if connections[KEYRING].vendor == "postgresql" else "none")
        if connections[KEYRING].vendor == "sqlite":  # the key-store backup's own bytes, searched as the disk proof does
            in_backup = key_residue.inspect_receipt(
                receipt, files=key_residue.KeyStoreFiles(paths=[keyring_backup], engine="sqlite")
            )
            assert in_backup["found"] == 1 and in_backup["unwrapsNow"] == 1 and in_backup["state"] == "residual"

        # (b) The scheduled rotation, run at its due instant, destroys the KEK that wrapped the erased key.
        due = encryption.kek_schedule().due_at
        assert due is not None and due <= receipt.residual_until
        result = encryption.scheduled_rotation(now=due, settle=0)
        assert result["rotation"] == "rotated" and result["destroyedKeks"] == [erased_kek]
        existing = [candidate.current_id for candidate in every_kek_that_exists()]
        assert erased_kek not in existing and existing
        assert erased_kek not in [crypto.kek_id(k) for k in kek.read_key_file(key_file)]

        after = read_from_backups(proof, data_backup, keyring_backup, memory_id, "b")
        assert (
            after["sealed"] == before["sealed"] and after["wrapped"] == before["wrapped"]
        )  # the attacker still holds both
        assert after["text"] is None and after["kek"] is None  # ... and no KEK that exists opens them

        receipt.refresh_from_db()
        closed = receipt.residual_closed_at()
        assert closed is not None and closed == KekRecord.objects.get(kek_id=erased_kek).destroyed_at
        assert receipt.purged_at <= closed <= receipt.residual_until
        shown = receipt.residual_json()
        assert shown["residualOpen"] is False and shown["residualClosedAt"] is not None
        closed_report = verify_receipt(world, receipt)
        assert (
            closed_report["residualClosedAt"] == shown["residualClosedAt"]
            and closed_report["unwrapsNow"] == 0
            and closed_report["clean"]
        )
        assert closed_report["state"] in ("closed", "none") and closed_report["problem"] is None
        if connections[KEYRING].vendor == "sqlite":
            in_backup = key_residue.inspect_receipt(
                receipt, files=key_residue.KeyStoreFiles(paths=[keyring_backup], engine="sqlite")
            )
            assert in_backup["found"] == 1 and in_backup["unwrapsNow"] == 0 and in_backup["state"] == "closed"
    finally:
        proof.drop_scratch()
