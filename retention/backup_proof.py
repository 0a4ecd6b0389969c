"""The forgetting check taken to a real backup (SPEC §8.2, `verify_forgetting --backup`): a backup
of the data's database and a snapshot of the key store before the canary is forgotten, restored
after it into a scratch database read with the key store as it is now (the canary's ciphertext is
there, its key is not, no byte of it reads) and with the old snapshot (it reads again: why the
key store's backups must be short). The key store's own files are searched for the canary's
destroyed wrapped key too (`retention.key_residue`): residual until the receipt's residualUntil.
A subclass of `ForgettingCheck`: it plants, forgets and cleans
up through that check's own steps."""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import override_settings
from django.utils import timezone

from governance.models import Member, Workspace
from memoryapp import sealing
from memoryapp.crypto import SealError
from memoryapp.keyring import KEYRING, DataKey, key_encryption_keys
from memoryapp.models import MemoryEmbedding, MemoryVersion
from retention.forgetting import (
    CHECK_SEMANTIC_BUDGET_SECONDS,
    CheckCannotRun,
    ForgettingCheck,
    new_marker,
    occurrences_on_disk,
)
from retention.key_residue import inspect_receipt
from retention.models import DeletionReceipt


class BackupProof(ForgettingCheck):
    """Cryptographic erase shown on a real backup: back up the data's database and snapshot the key
    store the way operators do (SQLite: the sqlite3 backup API; PostgreSQL: `pg_dump -Fc`), plant
    a canary (distinctive text and details), forget it through the agent API, then restore the
    data backup into a scratch database and read it with the key store as it is now: the canary's
    ciphertext rows are there, its key is not, its text, details, kind, terms and vector do not
    open, and none of their plaintext bytes is anywhere in the restored database (SQLite: the
    file; PostgreSQL: a plain `pg_dump` of the scratch database). With the key-store snapshot from
    before the erase the same rows DO open: a key-store backup is what keeps an erased memory
    readable, which is why it must be kept apart and briefly (KEYRING_BACKUP_RETENTION_DAYS).

    Scratch files live in a private temporary directory and scratch databases are dropped before
    `run` returns, whatever happens; they and the report hold no key and no plaintext (the marker
    aside, as the plain check's report does)."""

    backend = ""

    def __init__(self, workspace: Workspace, member: Member, bar: Any = None):
        super().__init__(workspace, member, bar=bar)
        self.detail_marker = new_marker()
        self.details = [f"Backup proof detail {self.detail_marker}: print the summary on blue paper."]
        self.plaintext: dict[str, list[bytes]] = {}
        self.opened: dict[str, Any] = {}  # the canary's fields as the application reads them before the erase
        self._scratch_databases: list[str] = []

    # --- what the canary is made of, before the erase ------------------------------------------
    def remember_plaintext(self) -> None:
        version = MemoryVersion.objects.get(pk=self.canary_id)
        embedding = MemoryEmbedding.objects.filter(memory_id=self.canary_id).first()
        if embedding is None:
            raise CheckCannotRun("the canary has no recall index entry (its terms and vector could not be checked)")
        vector = bytes(embedding.vector)
        terms = embedding.terms or ""
        distinctive_terms = [term for term in terms.split() if term.startswith("zqcanary")]
        self.opened = {
            "text": version.text,
            "details": version.details,
            "kind": version.kind,
            "terms": terms,
            "vector": vector,
        }
        # What is looked for in the restored bytes: each field's plaintext, whole and by its
        # distinctive parts; the vector as bytes and as PostgreSQL's hex text of a bytea.
        self.plaintext = {
            "text": [self.marker.encode(), version.text.encode()],
            "details": [self.detail_marker.encode(), version.details.encode()],
            "terms": [terms.encode(), *(term.encode() for term in distinctive_terms)],
            "vector": [vector, vector.hex().encode()],
        }
        if not distinctive_terms or self.detail_marker not in version.details:
            raise CheckCannotRun(
                "the canary's terms or details lost their marker (masking or the tokenizer changed): nothing "
                "distinctive to look for"
            )

    # --- backups, the way operators take them ---------------------------------------------------
    def _pg(self, alias: str) -> dict[str, str]:
        """libpq environment for the database behind `alias`."""
        params = connections[alias].settings_dict
        env = {**os.environ, "PGDATABASE": params["NAME"]}
        for key, name in (("HOST", "PGHOST"), ("PORT", "PGPORT"), ("USER", "PGUSER"), ("PASSWORD", "PGPASSWORD")):
            if params.get(key):
                env[name] = str(params[key])
        if params.get("OPTIONS", {}).get("sslmode"):
            env["PGSSLMODE"] = params["OPTIONS"]["sslmode"]
        return env

    @staticmethod
    def _tool(name: str) -> str:
        found = shutil.which(name)
        if found is None:
            raise CheckCannotRun(
                f"{name} was not found on PATH: the backup proof on PostgreSQL backs up with the PostgreSQL client "
                "tools (pg_dump, pg_restore, createdb, dropdb; the server's major version or newer) — install them "
                "(Debian: postgresql-client)"
            )
        return found

    def _run_tool(self, name: str, args: list[str], env: dict[str, str]) -> None:
        done = subprocess.run([self._tool(name), *args], env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise CheckCannotRun(f"{name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")

    def back_up(self, alias: str, target: Path) -> None:
        """Back up one database into `target`: SQLite through the backup API (a consistent copy of
        a live database), PostgreSQL with `pg_dump -Fc`."""
        if connections[alias].vendor == "sqlite":
            connections[alias].ensure_connection()
            with sqlite3.connect(target) as copy:
                connections[alias].connection.backup(copy)
            copy.close()
            return
        self._run_tool("pg_dump", ["-Fc", "--no-owner", "--no-privileges", "-f", str(target)], self._pg(alias))

    def restore(self, alias: str, backup: Path, label: str) -> Any:
        """Restore a backup of `alias`'s database into a scratch database: a DB-API connection to it."""
        if connections[alias].vendor == "sqlite":
            return sqlite3.connect(f"file:{backup}?mode=ro", uri=True)
        import psycopg

        env = self._pg(alias)
        scratch = f"{env['PGDATABASE'][:30]}_proof_{label}_{secrets.token_hex(4)}"
        self._run_tool("createdb", [scratch], env)
        self._scratch_databases.append(scratch)
        self._run_tool(
            "pg_restore", ["--no-owner", "--no-privileges", "--exit-on-error", "-d", scratch, str(backup)], env
        )
        params = connections[alias].settings_dict
        return psycopg.connect(
            dbname=scratch,
            host=params.get("HOST") or None,
            port=params.get("PORT") or None,
            user=params.get("USER") or None,
            password=params.get("PASSWORD") or None,
            autocommit=True,
        )

    def restored_bytes(self, scratch_dir: Path, alias: str, backup: Path) -> list[Path]:
        """The restored database as bytes to search: the SQLite file itself; on PostgreSQL a plain
        `pg_dump` of the scratch database it was restored into (every row as text, bytea as hex)."""
        if connections[alias].vendor == "sqlite":
            return [backup]
        dump = scratch_dir / "restored.sql"
        env = {**self._pg(alias), "PGDATABASE": self._scratch_databases[0]}
        self._run_tool("pg_dump", ["-Fp", "--no-owner", "--no-privileges", "-f", str(dump)], env)
        return [dump]

    def drop_scratch(self) -> None:
        if not self._scratch_databases:
            return
        env = self._pg(DEFAULT_DB_ALIAS)
        for name in self._scratch_databases:
            subprocess.run(
                [self._tool("dropdb"), "--if-exists", "--force", name], env=env, capture_output=True, timeout=120
            )
        self._scratch_databases = []

    # --- reading the restored canary --------------------------------------------------------------
    @staticmethod
    def _one(db: Any, sql: str, params: list[Any]) -> tuple | None:
        if isinstance(db, sqlite3.Connection):
            sql = sql.replace("%s", "?")
        cursor = db.cursor()
        try:
            cursor.execute(sql, params)
            return cursor.fetchone()
        finally:
            cursor.close()

    def _key_param(self, db: Any) -> Any:
        return self.key_id.hex if isinstance(db, sqlite3.Connection) else self.key_id

    def restored_rows(self, db: Any) -> dict[str, Any]:
        """The canary's sealed columns as the restored database holds them."""
        version_table, embedding_table = MemoryVersion._meta.db_table, MemoryEmbedding._meta.db_table
        version = self._one(
            db, f"SELECT key_id, text, details, kind FROM {version_table} WHERE id = %s", [self.canary_id]
        )
        embedding = self._one(db, f"SELECT terms, vector FROM {embedding_table} WHERE memory_id = %s", [self.canary_id])
        rows: dict[str, Any] = {}
        if version is not None:
            rows["version"] = dict(
                zip(
                    ("text", "details", "kind"), (bytes(v) if v is not None else None for v in version[1:]), strict=True
                )
            )
            rows["versionKeyId"] = str(version[0]).replace("-", "")
        if embedding is not None:
            rows["embedding"] = dict(
                zip(("terms", "vector"), (bytes(v) if v is not None else None for v in embedding), strict=True)
            )
        return rows

    def try_open(self, rows: dict[str, Any], keys: dict[Any, Any]) -> dict[str, bool]:
        """Which of the canary's fields open with these ciphers to what the application read before the erase."""
        readable = dict.fromkeys(("text", "details", "kind", "terms", "vector"), False)
        for model, part in ((MemoryVersion, "version"), (MemoryEmbedding, "embedding")):
            if part not in rows:
                continue
            try:
                opened = sealing.open_values(model, self.key_id, (self.workspace.pk, self.member.pk), keys, rows[part])
            except sealing.Unreadable:
                continue
            for name, value in opened.items():
                readable[name] = value == self.opened[name]
        return readable

    def old_keyring_keys(self, db: Any) -> dict[Any, Any]:
        """The canary's cipher from the key-store snapshot taken before the erase (absent if not in it)."""
        row = self._one(
            db, f"SELECT wrapped_by, wrapped FROM {DataKey._meta.db_table} WHERE key_id = %s", [self._key_param(db)]
        )
        if row is None:
            return {}
        try:
            return {self.key_id: AESGCM(key_encryption_keys().unwrap(self.key_id, row[0], bytes(row[1])))}
        except SealError:
            return {self.key_id: None}

    # --- the proof --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        if connection.in_atomic_block or connections[KEYRING].in_atomic_block:
            raise CheckCannotRun(
                "the backup proof must run outside a transaction: a backup sees only what is committed"
            )
        budget = max(settings.SEMANTIC_BUDGET_SECONDS, CHECK_SEMANTIC_BUDGET_SECONDS)
        with (
            override_settings(SEMANTIC_BUDGET_SECONDS=budget),
            tempfile.TemporaryDirectory(prefix="gam-backup-proof-") as scratch,
        ):
            try:
                return self._prove(Path(scratch))
            finally:
                self.drop_scratch()

    def _prove(self, scratch_dir: Path) -> dict[str, Any]:
        started = timezone.now()
        backend = connection.vendor
        if backend == "postgresql":
            for tool in ("pg_dump", "pg_restore", "createdb", "dropdb"):
                self._tool(tool)  # before anything is planted
        if self.bar is not None:
            self.bar.total = 7
        self.plant()
        self.advance("planted")
        status, forgotten, opened_databases = 0, {}, []
        data_backup, keyring_backup = scratch_dir / "data.backup", scratch_dir / "keyring.backup"
        try:
            self.remember_plaintext()
            self.back_up(DEFAULT_DB_ALIAS, data_backup)
            self.back_up(KEYRING, keyring_backup)
            self.advance("backed up")
            status, forgotten = self.agent("forget", {"memoryId": str(self.canary_id)})
            self.advance("forgotten")
            erased = (
                DeletionReceipt.objects.filter(pk=int(forgotten["receiptId"])).first()
                if status == 200 and forgotten.get("receiptId")
                else None
            )
            # the key store's own files, searched for the canary's destroyed wrapped key
            key_files = (
                inspect_receipt(erased)
                if erased is not None
                else {"state": "not_inspectable", "notInspectable": "the forget wrote no receipt", "problem": None}
            )
            restored = self.restore(DEFAULT_DB_ALIAS, data_backup, "data")
            opened_databases.append(restored)
            rows = self.restored_rows(restored)
            current = sealing.fetch_keys([self.key_id])  # the key store as it is now
            with_current = self.try_open(rows, current)
            grep_paths = self.restored_bytes(scratch_dir, DEFAULT_DB_ALIAS, data_backup)
            plaintext_hits = {
                field: sum(occurrences_on_disk(grep_paths, needle) for needle in needles if needle)
                for field, needles in self.plaintext.items()
            }
            # The control: the same search finds the canary's text as stored (ciphertext; hex in a plain dump).
            ciphertext_hits = sum(
                occurrences_on_disk(grep_paths, needle)
                for needle in (self.sealed_text, self.sealed_text.hex().encode())
                if needle
            )
            self.advance("restored with the current key store")
            old_keyring = self.restore(KEYRING, keyring_backup, "keyring")
            opened_databases.append(old_keyring)
            old_keys = self.old_keyring_keys(old_keyring)
            with_old = self.try_open(rows, old_keys)
            self.advance("restored with the old key store")
        finally:
            for db in opened_databases:
                db.close()
            self.cleanup()
            self.advance("cleaned up")
        reasons = []
        if status != 200:
            reasons.append(f"the forget answered {status}")
        if "version" not in rows or "embedding" not in rows:
            reasons.append(
                "the restored backup does not hold the canary's rows: it was not taken before the erase, and proves "
                "nothing"
            )
        elif rows.get("versionKeyId") != self.key_id.hex:
            reasons.append("the restored canary row names another data key")
        if not ciphertext_hits:
            reasons.append(
                "the restored database's bytes do not hold the canary's ciphertext: searching them proves nothing"
            )
        if self.key_id in current:
            reasons.append("the current key store still holds the canary's data key")
        reasons += [
            f"its {field} opens from the restored backup with the current key store"
            for field, readable in with_current.items()
            if readable
        ]
        reasons += [
            f"{hits} plaintext occurrence(s) of its {field} in the restored database"
            for field, hits in plaintext_hits.items()
            if hits
        ]
        unreadable_with_old = [field for field, readable in with_old.items() if not readable]
        if not old_keys:
            reasons.append(
                "the key-store snapshot from before the erase lacks the canary's key: the snapshot proves nothing"
            )
        elif unreadable_with_old:
            reasons.append(
                f"with the key-store snapshot from before the erase its {', '.join(unreadable_with_old)} still do not "
                "open: the proof's control failed"
            )
        if key_files.get("problem"):
            reasons.append(key_files["problem"])
        clean = not reasons
        findings = {
            "keyStoreFiles": key_files,
            "backend": backend,
            "backups": {
                "data": "sqlite3 backup API" if backend == "sqlite" else "pg_dump -Fc",
                "keyring": "sqlite3 backup API" if connections[KEYRING].vendor == "sqlite" else "pg_dump -Fc",
            },
            "restored": {
                "ciphertextRows": {
                    "memoryVersion": int("version" in rows),
                    "memoryEmbedding": int("embedding" in rows),
                },
                "keyInCurrentKeyStore": int(self.key_id in current),
                "readableWithCurrentKeyStore": with_current,
                "plaintextOccurrences": plaintext_hits,
                "ciphertextOccurrences": ciphertext_hits,
            },
            "withKeyStoreBackupFromBeforeTheErase": {"keyPresent": int(bool(old_keys)), "readable": with_old},
            "reasons": reasons,
            "clean": clean,
        }
        forget_receipt = (
            DeletionReceipt.objects.filter(pk=int(forgotten["receiptId"])).first()
            if status == 200 and forgotten.get("receiptId")
            else None
        )
        receipt = self.record(
            forget_receipt,
            started=started,
            filters={"backupProof": True},
            verification={
                "markerSha256": self.marker_sha256,
                "forgetStatus": status,
                "backupProof": findings,
                "clean": clean,
            },
        )
        return {**self.report_head(forget_receipt, receipt), **findings}
