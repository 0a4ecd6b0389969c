"""Forgetting reaches backups (SPEC §8.2, issue 24 step 6): `verify_forgetting --backup` backs up
the database and the key store as operators do, forgets a canary, restores the backup with the key
store as it is now — the canary's ciphertext is there, its key is not, nothing of it opens and no
plaintext byte of it is in the restored database — and with the key-store backup from before the
erase, which does read it. On both backends: SQLite's backup API, PostgreSQL's pg_dump/pg_restore.
"""

from __future__ import annotations

import io
import json
import subprocess

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from memoryapp.models import MemoryVersion
from retention.models import DeletionReceipt, Operation

# pg_dump and the sqlite3 backup API see only what is committed: no test transaction around it.
pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = {"text", "details", "kind", "terms", "vector"}


def run_proof(world, *args) -> dict:
    out = io.StringIO()
    call_command("verify_forgetting", "--workspace", str(world.workspace.pk), "--backup", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def scratch_databases() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", ["%\\_proof\\_%"])
        return {name for (name,) in cursor.fetchall()}


def test_a_backup_restored_after_the_erase_holds_only_ciphertext_but_the_old_key_store_reads_it(world):
    before = scratch_databases() if connection.vendor == "postgresql" else set()
    report = run_proof(world)
    assert report["clean"] is True, report["reasons"]
    assert report["backend"] == connection.vendor
    assert report["backups"]["data"] == ("pg_dump -Fc" if connection.vendor == "postgresql" else "sqlite3 backup API")
    restored = report["restored"]
    assert restored["ciphertextRows"] == {"memoryVersion": 1, "memoryEmbedding": 1}
    assert restored["ciphertextOccurrences"] >= 1  # the search sees the rows' bytes ...
    assert restored["plaintextOccurrences"] == dict.fromkeys(
        ["text", "details", "terms", "vector"], 0
    )  # ... and no plaintext
    assert restored["keyInCurrentKeyStore"] == 0
    assert restored["readableWithCurrentKeyStore"] == dict.fromkeys(FIELDS, False)
    old = report["withKeyStoreBackupFromBeforeTheErase"]
    assert old == {"keyPresent": 1, "readable": dict.fromkeys(FIELDS, True)}
    # Recorded, without the marker; the canary and its scaffolding are gone; no scratch database left.
    receipt = DeletionReceipt.objects.get(pk=report["receiptId"])
    assert receipt.operation == Operation.FORGETTING_CHECK and receipt.verification["clean"] is True
    assert receipt.verification["backupProof"]["restored"] == restored
    assert report["marker"] not in json.dumps([receipt.manifest, receipt.verification])
    assert DeletionReceipt.objects.get(pk=report["forgetReceiptId"]).operation == Operation.FORGET
    assert not MemoryVersion.objects.filter(namespace="forgetting-check").exists()
    if connection.vendor == "postgresql":
        assert scratch_databases() == before


def test_an_erase_that_leaves_the_key_is_not_clean(world, monkeypatch):
    from retention import erasure

    monkeypatch.setattr(erasure, "destroy_keys", lambda key_ids: [])  # a key store that failed to delete
    with pytest.raises(SystemExit) as exit_info:
        run_proof(world)
    assert exit_info.value.code == 1
    (receipt,) = [
        r
        for r in DeletionReceipt.objects.filter(operation=Operation.FORGETTING_CHECK)
        if "backupProof" in r.verification
    ]
    findings = receipt.verification["backupProof"]
    assert findings["clean"] is False
    assert findings["restored"]["keyInCurrentKeyStore"] == 1
    assert findings["restored"]["readableWithCurrentKeyStore"] == dict.fromkeys(FIELDS, True)
    assert "the current key store still holds the canary's data key" in findings["reasons"]
    assert "its text opens from the restored backup with the current key store" in findings["reasons"]


def test_a_backup_taken_after_the_erase_proves_nothing_and_says_so(world, monkeypatch):
    from retention.backup_proof import BackupProof

    taken_early = BackupProof.back_up

    def late_backup(self, alias, target):  # the data backed up once the canary is already gone
        if alias == "default":
            self._late_target = target
            return
        taken_early(self, alias, target)

    original_restore = BackupProof.restore

    def restore(self, alias, backup, label):
        if alias == "default":
            taken_early(self, alias, backup)
        return original_restore(self, alias, backup, label)

    monkeypatch.setattr(BackupProof, "back_up", late_backup)
    monkeypatch.setattr(BackupProof, "restore", restore)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_forgetting", "--workspace", str(world.workspace.pk), "--backup", stdout=out)
    assert exit_info.value.code == 1
    printed = out.getvalue()
    assert "NOT CLEAN" in printed
    assert "the restored backup does not hold the canary's rows" in printed


def test_the_printed_report_names_each_field_and_says_clean(world):
    out = io.StringIO()
    call_command("verify_forgetting", "--workspace", str(world.workspace.pk), "--backup", stdout=out)
    printed = out.getvalue()
    assert printed.rstrip().splitlines()[-1].endswith(": CLEAN")
    for field in FIELDS:
        assert f"  {field:<8} readable: no" in printed
    assert "readable: text, details, kind, terms, vector" in printed


def test_without_pg_dump_the_proof_cannot_run_and_says_why(world, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("backend: PostgreSQL only (SQLite backs up through its own API)")
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "pg_dump" else real_which(name, *a, **k))
    with pytest.raises(CommandError) as error:
        run_proof(world)
    assert error.value.returncode == 2
    assert "pg_dump was not found on PATH" in str(error.value)
    assert not MemoryVersion.objects.filter(namespace="forgetting-check").exists()  # nothing was planted


def test_the_client_tools_are_the_ones_the_proof_runs(world):
    if connection.vendor != "postgresql":
        pytest.skip("backend: PostgreSQL only")
    done = subprocess.run(["pg_dump", "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("pg_dump (PostgreSQL)")
