"""The forgetting check (SPEC §8): plant a synthetic canary memory for a member, show it on every
surface, forget it through the agent API, show every surface empty, and record the result as a
deletion receipt (`receipts.append`, operation `forgetting_check`).

The agent API, the member API and the member page are read over HTTP on purpose, through the
whole stack as this deployment serves it (one of its ALLOWED_HOSTS, https): a middleware or a
response cache that kept the canary would only show there. The tables, the index, the access log,
the cache and the SQLite files are read directly. `manage.py verify_forgetting` is the command
that runs it (exit 1 if anything remains, 2 if the check cannot run).

`BackupProof` (`verify_forgetting --backup`) is the same check taken to a real backup: a backup of
the database and a snapshot of the key store before the forget, restored after it (SPEC §8.2).

Over ~400 lines on purpose: the two checks of one canary; the backup proof plants, forgets and
cleans up through the forgetting check's own steps (it is a subclass), and both search bytes with
`occurrences_on_disk`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sqlite3
import string
import subprocess
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import Client, override_settings
from django.urls import Resolver404, resolve
from django.utils import timezone

from core.timestamps import iso
from governance import actions as governance
from governance.models import AuditEvent, Credential, Member, Workspace
from governance.permissions import scope_allowed_for_role
from memoryapp import sealing
from memoryapp.access_log import count_listing
from memoryapp.crypto import SealError
from memoryapp.keyring import KEYRING, DataKey, key_encryption_keys, key_store
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from memoryapp.recall.tokenize import index_terms
from retention import receipts
from retention.erasure import erase_memories, residual_window, verify
from retention.models import DeletionReceipt, Operation

NAMESPACE = "forgetting-check"
ACTOR = "system: forgetting check (manage.py verify_forgetting)"
CHECK_SEMANTIC_BUDGET_SECONDS = 60.0
PARAPHRASE = "When should the quarterly sales summary reach this person each week?"


class CheckCannotRun(Exception):
    """The check could not start (no member who may write, the canary refused): nothing was
    proven either way, so the command reports it instead of CLEAN or DIRTY."""


def serving_host() -> str:
    """A host name this deployment answers to: the first concrete entry of ALLOWED_HOSTS."""
    for entry in settings.ALLOWED_HOSTS:
        host = entry.lstrip(".")
        if host and "*" not in host:
            return host
    return "localhost"  # ALLOWED_HOSTS = ["*"] (or empty with DEBUG): any name is accepted


def sqlite_files(alias: str = DEFAULT_DB_ALIAS) -> list[Path]:
    """An embedded database's file and its write-ahead log (and rollback journal): the data's, or
    the key store's (`keyring`)."""
    if connections[alias].vendor != "sqlite":
        return []
    name = Path(connections[alias].settings_dict["NAME"])
    return [path for path in (name, Path(f"{name}-wal"), Path(f"{name}-journal")) if path.exists()]


def occurrences_on_disk(paths: list[Path], needle: bytes, block: int = 1 << 20) -> int:
    """How many times `needle` appears in these files, read in blocks. Each block is searched
    with the previous block's last len(needle) - 1 bytes in front, which cannot hold a whole
    occurrence themselves: one spanning two blocks is counted once, none twice."""
    keep = len(needle) - 1
    found = 0
    for path in paths:
        with path.open("rb") as handle:
            tail = b""
            while chunk := handle.read(block):
                window = tail + chunk
                found += window.count(needle)
                tail = window[-keep:] if keep else b""
    return found


def new_marker() -> str:
    # Letters only: digit runs or token shapes would be masked and the marker would vanish.
    return "zqcanary" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(16))


class ForgettingCheck:
    def __init__(self, workspace: Workspace, member: Member, bar: Any = None):
        self.workspace = workspace
        self.member = member
        self.marker = new_marker()
        self.text = f"Forgetting check canary {self.marker}: the member wants the quarterly sales report delivered on Tuesday mornings."
        # Requests go through the whole stack as this deployment serves them: one of its own
        # host names (ALLOWED_HOSTS) over https (SECURE_SSL_REDIRECT), never Django's "testserver".
        request_defaults = {"HTTP_HOST": serving_host(), "SERVER_PORT": "443"}
        self.client = Client(raise_request_exception=False, **request_defaults)
        self.member_client = Client(raise_request_exception=False, **request_defaults)
        self.member_client.force_login(member.user)
        self.token = ""
        self.credential: Credential | None = None
        self.collection = None
        self.canary_id: int | None = None
        self.as_of: datetime | None = None
        self.vector: np.ndarray | None = None
        self.key_id = None  # the canary's data key (SPEC §8.2)
        self.sealed_text = b""  # its text as stored: ciphertext
        self.wrapped_key = b""  # its data key as stored in the key store: wrapped
        self.details: list[str] = []  # the canary's details, if it has any (the backup proof's has)
        self.bar = bar  # a progress bar (core.progress) advanced once per step, or None

    def advance(self, step: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(step)
            self.bar.update(1)

    # --- the agent API, in process -------------------------------------------------------------
    def agent(self, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = self.client.post(f"/api/agent/v1/memories/{operation}", json.dumps(body), content_type="application/json", secure=True, HTTP_AUTHORIZATION=f"Bearer {self.token}")
        try:
            data = response.json()
        except ValueError:
            data = {}
        return response.status_code, data

    def hits(self, memories: list[dict[str, Any]]) -> int:
        return sum(1 for m in memories if m.get("id") == str(self.canary_id) or self.marker in (m.get("text") or ""))

    # --- setup and teardown --------------------------------------------------------------------
    def plant(self) -> None:
        if not scope_allowed_for_role("memory:write", self.member.role):
            raise CheckCannotRun(f"member #{self.member.pk} cannot write memories (role {self.member.role}); pass --member")
        self.collection = governance.create_collection(self.workspace, name="Forgetting check (temporary)", restricted=True, readers=[self.member])
        document = governance.create_document(self.collection, title="Forgetting check source", text="Quarterly sales reports are delivered on Tuesday mornings.")
        passage = document.passages.first()
        self.credential, self.token = governance.create_credential(self.member, name="forgetting check (temporary)", scopes=["memory:read", "memory:write"])
        body = {"namespace": NAMESPACE, "text": self.text, "citations": [str(passage.pk)]}
        if self.details:
            body["details"] = self.details
        status, data = self.agent("remember", body)
        if status != 201:
            raise CheckCannotRun(f"the canary could not be planted: {status} {data.get('error', {}).get('code', '')}")
        self.canary_id = int(data["memory"]["id"])
        self.as_of = timezone.now()
        embedding = MemoryEmbedding.objects.filter(memory_id=self.canary_id).first()
        if embedding is not None:
            self.vector = np.frombuffer(bytes(embedding.vector), dtype="<f4").astype(np.float32)
        self.key_id, sealed = MemoryVersion.objects.filter(pk=self.canary_id).values_list("key_id", "text").first()
        self.sealed_text = sealed.raw if isinstance(sealed.raw, bytes) else b""
        self.wrapped_key = bytes(DataKey.objects.filter(pk=self.key_id).values_list("wrapped", flat=True).first() or b"")

    def cleanup(self) -> None:
        leftovers = list(MemoryVersion.objects.filter(pk=self.canary_id).values_list("pk", flat=True)) if self.canary_id else []
        if leftovers:  # the forget failed: do not leave a synthetic memory behind
            erase_memories(leftovers, operation=Operation.FORGETTING_CHECK, workspace_id=self.workspace.pk, member_id=self.member.pk, actor_label=ACTOR, filters={"canaryCleanup": True})
        if self.credential is not None:
            governance.revoke_credential(self.credential, actor=None, reason="forgetting check finished")
        if self.collection is not None:
            governance.delete_collection(self.collection, actor=None)

    # --- surfaces: each returns how many traces of the canary it shows ------------------------
    def surfaces(self) -> dict[str, Callable[[], int]]:
        def agent_count(operation: str, body: dict[str, Any]) -> Callable[[], int]:
            def run() -> int:
                status, data = self.agent(operation, body)
                if status != 200:
                    raise RuntimeError(f"{operation} answered {status} {data.get('error', {}).get('code', '')}")
                return self.hits(data.get("memories", []))

            return run

        found: dict[str, Callable[[], int]] = {
            "agentList": agent_count("list", {"limit": 100}),
            "agentListNamespace": agent_count("list", {"namespace": NAMESPACE, "limit": 100}),
            "agentListAsOf": agent_count("list", {"namespace": NAMESPACE, "asOf": iso(self.as_of), "limit": 100}),
            "recallExactWords": agent_count("recall", {"query": self.marker, "limit": 50}),
            "recallParaphrase": agent_count("recall", {"query": PARAPHRASE, "namespace": NAMESPACE, "limit": 50}),
            "recallParaphraseAllNamespaces": agent_count("recall", {"query": PARAPHRASE, "limit": 50}),
            "memberApi": self.member_api,
            "tableMemoryVersionById": lambda: MemoryVersion.objects.filter(pk=self.canary_id).count(),
            # Content is sealed: the member's rows are opened and searched (no query can look into them).
            "tableMemoryVersionByText": lambda: sum(self.marker in (v.text or "") for v in MemoryVersion.objects.filter(member=self.member).only("pk", "text").iterator(chunk_size=1000)),
            "tableCitation": lambda: Citation.objects.filter(memory_id=self.canary_id).count(),
            "tableMemoryEmbedding": lambda: MemoryEmbedding.objects.filter(memory_id=self.canary_id).count(),
            # The stored BM25 terms are stemmed ("…ies" → "…i"): look for the marker as it is indexed.
            "recallTermsByText": lambda: sum(
                index_terms(self.marker)[0] in (e.terms or "").split() for e in MemoryEmbedding.objects.filter(memory__member=self.member).only("memory_id", "terms").iterator(chunk_size=1000)
            ),
            "keyringDataKey": lambda: len(key_store().present([self.key_id])) if self.key_id else 0,
            "accessLogEntries": lambda: count_listing([self.canary_id]),  # the reads above logged it
            "embeddingSimilarity": self.similar_embeddings,
        }
        if sqlite_files() and not connection.in_atomic_block and self.sealed_text:
            # The bytes themselves: erased rows must leave the database file and its WAL. (Not
            # inside a transaction, i.e. a test's: nothing is committed to the files there.) The
            # text is only ever there sealed: its ciphertext is what is looked for.
            found["sqliteFiles"] = lambda: occurrences_on_disk(sqlite_files(), self.sealed_text)
        if sqlite_files(KEYRING) and not connections[KEYRING].in_atomic_block and self.wrapped_key:
            found["keyringFiles"] = lambda: occurrences_on_disk(sqlite_files(KEYRING), self.wrapped_key)
        if self.page_url():
            found["memberPage"] = self.member_page
        return found

    def member_api(self) -> int:
        response = self.member_client.get(f"/api/w/{self.workspace.pk}/ask-history/agent-memories", {"namespace": NAMESPACE, "limit": 100}, secure=True)
        if response.status_code != 200:
            raise RuntimeError(f"member API answered {response.status_code}")
        return self.hits(response.json().get("memories", []))

    def page_url(self) -> str | None:
        url = f"/w/{self.workspace.pk}/what-bundata-remembers/"
        try:
            resolve(url)
        except Resolver404:
            return None
        return url

    def member_page(self) -> int:
        response = self.member_client.get(self.page_url(), secure=True)
        if response.status_code != 200:
            raise RuntimeError(f"member page answered {response.status_code}")
        return response.content.decode("utf-8", "replace").count(self.marker)

    def similar_embeddings(self) -> int:
        """Stored vectors of this member that are the canary's (cosine ≥ 0.999), whatever row holds them."""
        if self.vector is None:
            return 0
        matches = 0
        for embedding in MemoryEmbedding.objects.filter(memory__member=self.member).only("memory_id", "vector", "dim").iterator(chunk_size=1000):
            if embedding.dim != self.vector.shape[0]:
                continue
            other = np.frombuffer(bytes(embedding.vector), dtype="<f4").astype(np.float32)
            denominator = float(np.linalg.norm(other) * np.linalg.norm(self.vector)) or 1.0
            if float(other @ self.vector) / denominator >= 0.999:
                matches += 1
        return matches

    def cache_hits(self) -> int:
        """Values in the shared cache (Redis in production, this process's memory embedded) that
        contain the marker. The application caches no memory content, so this must stay 0."""
        needle = self.marker.encode()
        client = getattr(getattr(cache, "_cache", None), "get_client", None)
        if client is not None:  # django's RedisCache
            redis = client(write=False)
            hits = 0
            for key in redis.scan_iter(count=1000):
                if needle in key:
                    hits += 1
                    continue
                if redis.type(key) == b"string" and needle in (redis.get(key) or b""):
                    hits += 1
            return hits
        store = getattr(cache, "_cache", {})
        return sum(1 for key, value in list(store.items()) if needle in str(key).encode() or needle in (value if isinstance(value, bytes) else b""))

    def never_surfaces(self) -> dict[str, Callable[[], int]]:
        """Stores that must never hold memory content: empty before the forget as after it."""
        probes: dict[str, Callable[[], int]] = {
            "cache": self.cache_hits,
            "receiptsAndAuditEvents": lambda: (
                DeletionReceipt.objects.filter(manifest__icontains=self.marker).count()
                + DeletionReceipt.objects.filter(verification__icontains=self.marker).count()
                + AuditEvent.objects.filter(changes__icontains=self.marker).count()
            ),
        }
        if [*sqlite_files(), *sqlite_files(KEYRING)] and not connection.in_atomic_block:
            # Memory content is stored only sealed (SPEC §8.2): its plaintext never reaches a file.
            probes["plaintextInSqliteFiles"] = lambda: occurrences_on_disk([*sqlite_files(), *sqlite_files(KEYRING)], self.marker.encode())
        return probes

    def observe(self, probes: dict[str, Callable[[], int]]) -> dict[str, Any]:
        results: dict[str, Any] = {}
        for name, probe in probes.items():
            try:
                results[name] = probe()
            except Exception as exc:  # a surface that cannot answer is a failed check, not a crash
                results[name] = f"error: {exc}"
            self.advance(name)
        return results

    # --- the check -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        # The check asks whether the canary can be found, not how fast: a busy host must not let
        # the 800 ms query-embedding budget turn "not found by meaning" into a false pass or fail.
        with override_settings(SEMANTIC_BUDGET_SECONDS=max(settings.SEMANTIC_BUDGET_SECONDS, CHECK_SEMANTIC_BUDGET_SECONDS)):
            return self._run()

    def _run(self) -> dict[str, Any]:
        started = timezone.now()
        self.plant()
        if self.bar is not None:  # plant, every probe before and after, forget, clean up
            self.bar.total = 3 + 2 * (len(self.surfaces()) + len(self.never_surfaces()))
        self.advance("planted")
        try:
            before, never_before = self.observe(self.surfaces()), self.observe(self.never_surfaces())
            status, forgotten = self.agent("forget", {"memoryId": str(self.canary_id)})
            self.advance("forgotten")
            forget_receipt = DeletionReceipt.objects.filter(pk=int(forgotten["receiptId"])).first() if status == 200 else None
            after, never_after = self.observe(self.surfaces()), self.observe(self.never_surfaces())
        finally:
            self.cleanup()
            self.advance("cleaned up")
        surfaces = {name: {"before": before[name], "after": after.get(name)} for name in before}
        never = {name: {"before": never_before[name], "after": never_after.get(name)} for name in never_before}
        reachable_before = all(isinstance(s["before"], int) and s["before"] > 0 for s in surfaces.values())
        empty_after = all(s["after"] == 0 for s in surfaces.values())
        never_held = all(s["before"] == 0 and s["after"] == 0 for s in never.values())
        remaining = verify([self.canary_id])
        clean = status == 200 and reachable_before and empty_after and never_held and remaining["clean"]
        now = timezone.now()
        receipt = receipts.append(
            operation=Operation.FORGETTING_CHECK,
            workspace_ref=self.workspace.pk,
            member_ref=self.member.pk,
            actor_label=ACTOR,
            manifest={
                "artifacts": forget_receipt.manifest.get("artifacts", {}) if forget_receipt else {},
                "filters": {"canary": True, "namespace": NAMESPACE, "forgetReceiptId": str(forget_receipt.pk) if forget_receipt else None},
            },
            memory_version_ids=[self.canary_id],
            requested_at=started,
            unreachable_at=forget_receipt.unreachable_at if forget_receipt else now,
            purged_at=forget_receipt.purged_at if forget_receipt else now,
            residual=residual_window(forget_receipt.purged_at if forget_receipt else now),
            verification={
                **remaining,
                "markerSha256": hashlib.sha256(self.marker.encode()).hexdigest(),
                "forgetStatus": status,
                "surfaces": surfaces,
                "neverHoldContent": never,
                "reachableBefore": reachable_before,
                "emptyAfter": empty_after,
                "clean": clean,
            },
        )
        return {
            "workspaceId": str(self.workspace.pk),
            "memberId": str(self.member.pk),
            "canaryId": str(self.canary_id),
            "marker": self.marker,
            "forgetReceiptId": str(forget_receipt.pk) if forget_receipt else None,
            "receiptId": str(receipt.pk),
            "surfaces": surfaces,
            "neverHoldContent": never,
            "reachableBefore": reachable_before,
            "emptyAfter": empty_after,
            "stores": remaining["remaining"],
            "clean": clean,
        }


# --- the proof with a real backup (SPEC §8.2) -------------------------------------------------------
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
        self.opened = {"text": version.text, "details": version.details, "kind": version.kind, "terms": terms, "vector": vector}
        # What is looked for in the restored bytes: each field's plaintext, whole and by its
        # distinctive parts; the vector as bytes and as PostgreSQL's hex text of a bytea.
        self.plaintext = {
            "text": [self.marker.encode(), version.text.encode()],
            "details": [self.detail_marker.encode(), version.details.encode()],
            "terms": [terms.encode(), *(term.encode() for term in distinctive_terms)],
            "vector": [vector, vector.hex().encode()],
        }
        if not distinctive_terms or self.detail_marker not in version.details:
            raise CheckCannotRun("the canary's terms or details lost their marker (masking or the tokenizer changed): nothing distinctive to look for")

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
                f"{name} was not found on PATH: the backup proof on PostgreSQL backs up with the PostgreSQL client tools "
                "(pg_dump, pg_restore, createdb, dropdb; the server's major version or newer) — install them (Debian: postgresql-client)"
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
        self._run_tool("pg_restore", ["--no-owner", "--no-privileges", "--exit-on-error", "-d", scratch, str(backup)], env)
        params = connections[alias].settings_dict
        return psycopg.connect(
            dbname=scratch, host=params.get("HOST") or None, port=params.get("PORT") or None, user=params.get("USER") or None, password=params.get("PASSWORD") or None, autocommit=True
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
            subprocess.run([self._tool("dropdb"), "--if-exists", "--force", name], env=env, capture_output=True, timeout=120)
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
        version = self._one(db, f"SELECT key_id, text, details, kind FROM {version_table} WHERE id = %s", [self.canary_id])
        embedding = self._one(db, f"SELECT terms, vector FROM {embedding_table} WHERE memory_id = %s", [self.canary_id])
        rows: dict[str, Any] = {}
        if version is not None:
            rows["version"] = dict(zip(("text", "details", "kind"), (bytes(v) if v is not None else None for v in version[1:]), strict=True))
            rows["versionKeyId"] = str(version[0]).replace("-", "")
        if embedding is not None:
            rows["embedding"] = dict(zip(("terms", "vector"), (bytes(v) if v is not None else None for v in embedding), strict=True))
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
        row = self._one(db, f"SELECT wrapped_by, wrapped FROM {DataKey._meta.db_table} WHERE key_id = %s", [self._key_param(db)])
        if row is None:
            return {}
        try:
            return {self.key_id: AESGCM(key_encryption_keys().unwrap(self.key_id, row[0], bytes(row[1])))}
        except SealError:
            return {self.key_id: None}

    # --- the proof --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        if connection.in_atomic_block or connections[KEYRING].in_atomic_block:
            raise CheckCannotRun("the backup proof must run outside a transaction: a backup sees only what is committed")
        budget = max(settings.SEMANTIC_BUDGET_SECONDS, CHECK_SEMANTIC_BUDGET_SECONDS)
        with override_settings(SEMANTIC_BUDGET_SECONDS=budget), tempfile.TemporaryDirectory(prefix="gam-backup-proof-") as scratch:
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
            restored = self.restore(DEFAULT_DB_ALIAS, data_backup, "data")
            opened_databases.append(restored)
            rows = self.restored_rows(restored)
            current = sealing.fetch_keys([self.key_id])  # the key store as it is now
            with_current = self.try_open(rows, current)
            grep_paths = self.restored_bytes(scratch_dir, DEFAULT_DB_ALIAS, data_backup)
            plaintext_hits = {field: sum(occurrences_on_disk(grep_paths, needle) for needle in needles if needle) for field, needles in self.plaintext.items()}
            # The control: the same search finds the canary's text as stored (ciphertext; hex in a plain dump).
            ciphertext_hits = sum(occurrences_on_disk(grep_paths, needle) for needle in (self.sealed_text, self.sealed_text.hex().encode()) if needle)
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
            reasons.append("the restored backup does not hold the canary's rows: it was not taken before the erase, and proves nothing")
        elif rows.get("versionKeyId") != self.key_id.hex:
            reasons.append("the restored canary row names another data key")
        if not ciphertext_hits:
            reasons.append("the restored database's bytes do not hold the canary's ciphertext: searching them proves nothing")
        if self.key_id in current:
            reasons.append("the current key store still holds the canary's data key")
        reasons += [f"its {field} opens from the restored backup with the current key store" for field, readable in with_current.items() if readable]
        reasons += [f"{hits} plaintext occurrence(s) of its {field} in the restored database" for field, hits in plaintext_hits.items() if hits]
        unreadable_with_old = [field for field, readable in with_old.items() if not readable]
        if not old_keys:
            reasons.append("the key-store snapshot from before the erase lacks the canary's key: the snapshot proves nothing")
        elif unreadable_with_old:
            reasons.append(f"with the key-store snapshot from before the erase its {', '.join(unreadable_with_old)} still do not open: the proof's control failed")
        clean = not reasons
        findings = {
            "backend": backend,
            "backups": {"data": "sqlite3 backup API" if backend == "sqlite" else "pg_dump -Fc", "keyring": "sqlite3 backup API" if connections[KEYRING].vendor == "sqlite" else "pg_dump -Fc"},
            "restored": {
                "ciphertextRows": {"memoryVersion": int("version" in rows), "memoryEmbedding": int("embedding" in rows)},
                "keyInCurrentKeyStore": int(self.key_id in current),
                "readableWithCurrentKeyStore": with_current,
                "plaintextOccurrences": plaintext_hits,
                "ciphertextOccurrences": ciphertext_hits,
            },
            "withKeyStoreBackupFromBeforeTheErase": {"keyPresent": int(bool(old_keys)), "readable": with_old},
            "reasons": reasons,
            "clean": clean,
        }
        forget_receipt = DeletionReceipt.objects.filter(pk=int(forgotten["receiptId"])).first() if status == 200 and forgotten.get("receiptId") else None
        now = timezone.now()
        receipt = receipts.append(
            operation=Operation.FORGETTING_CHECK,
            workspace_ref=self.workspace.pk,
            member_ref=self.member.pk,
            actor_label=ACTOR,
            manifest={
                "artifacts": forget_receipt.manifest.get("artifacts", {}) if forget_receipt else {},
                "filters": {"canary": True, "backupProof": True, "namespace": NAMESPACE, "forgetReceiptId": str(forget_receipt.pk) if forget_receipt else None},
            },
            memory_version_ids=[self.canary_id],
            requested_at=started,
            unreachable_at=forget_receipt.unreachable_at if forget_receipt else now,
            purged_at=forget_receipt.purged_at if forget_receipt else now,
            residual=residual_window(forget_receipt.purged_at if forget_receipt else now),
            verification={"markerSha256": hashlib.sha256(self.marker.encode()).hexdigest(), "forgetStatus": status, "backupProof": findings, "clean": clean},
        )
        return {
            "workspaceId": str(self.workspace.pk),
            "memberId": str(self.member.pk),
            "canaryId": str(self.canary_id),
            "marker": self.marker,
            "forgetReceiptId": str(forget_receipt.pk) if forget_receipt else None,
            "receiptId": str(receipt.pk),
            **findings,
        }
