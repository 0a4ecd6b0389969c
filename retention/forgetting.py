"""The forgetting check (SPEC §8): plant a synthetic canary memory for a member, show it on every
surface, forget it through the agent API, show every surface empty, and record the result as a
deletion receipt (`receipts.append`, operation `forgetting_check`).

The agent API, the member API and the member page are read over HTTP on purpose, through the
whole stack as this deployment serves it (one of its ALLOWED_HOSTS, https): a middleware or a
response cache that kept the canary would only show there. The tables, the index, the access log,
the cache and the SQLite files are read directly. `manage.py verify_forgetting` is the command
that runs it (exit 1 if anything remains, 2 if the check cannot run).

`retention.backup_proof.BackupProof` (`verify_forgetting --backup`) is the same check taken to a
real backup: a backup of the database and a snapshot of the key store before the forget, restored
after it (SPEC §8.2).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import string
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
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
from memoryapp.access_log import count_listing
from memoryapp.keyring import KEYRING, DataKey, key_store
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion
from memoryapp.recall.tokenize import index_terms
from retention import receipts
from retention.erasure import erase_memories, residual_until_of, residual_window, verify
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
        self.text = (
            f"Forgetting check canary {self.marker}: the member wants the quarterly sales report delivered "
            "on Tuesday mornings."
        )
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

    @property
    def marker_sha256(self) -> str:
        return hashlib.sha256(self.marker.encode()).hexdigest()

    def record(
        self,
        forget_receipt: DeletionReceipt | None,
        *,
        started: datetime,
        filters: dict[str, Any],
        verification: dict[str, Any],
    ) -> DeletionReceipt:
        """The check's own receipt (operation `forgetting_check`): what the forget erased, when,
        and what was found after it. Without a forget receipt (the forget failed) it says now."""
        now = timezone.now()
        return receipts.append(
            operation=Operation.FORGETTING_CHECK,
            workspace_ref=self.workspace.pk,
            member_ref=self.member.pk,
            actor_label=ACTOR,
            manifest={
                "artifacts": forget_receipt.manifest.get("artifacts", {}) if forget_receipt else {},
                "filters": {
                    "canary": True,
                    **filters,
                    "namespace": NAMESPACE,
                    "forgetReceiptId": str(forget_receipt.pk) if forget_receipt else None,
                },
            },
            memory_version_ids=[self.canary_id],
            requested_at=started,
            unreachable_at=forget_receipt.unreachable_at if forget_receipt else now,
            purged_at=forget_receipt.purged_at if forget_receipt else now,
            residual=(residual := residual_window(forget_receipt.purged_at if forget_receipt else now)),
            residual_until=residual_until_of(residual),
            verification=verification,
        )

    def report_head(self, forget_receipt: DeletionReceipt | None, receipt: DeletionReceipt) -> dict[str, Any]:
        return {
            "workspaceId": str(self.workspace.pk),
            "memberId": str(self.member.pk),
            "canaryId": str(self.canary_id),
            "marker": self.marker,
            "forgetReceiptId": str(forget_receipt.pk) if forget_receipt else None,
            "receiptId": str(receipt.pk),
        }

    # --- the agent API, in process -------------------------------------------------------------
    def agent(self, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = self.client.post(
            f"/api/agent/v1/memories/{operation}",
            json.dumps(body),
            content_type="application/json",
            secure=True,
            HTTP_AUTHORIZATION=f"Bearer {self.token}",
        )
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
            raise CheckCannotRun(
                f"member #{self.member.pk} cannot write memories (role {self.member.role}); pass --member"
            )
        self.collection = governance.create_collection(
            self.workspace, name="Forgetting check (temporary)", restricted=True, readers=[self.member]
        )
        document = governance.create_document(
            self.collection,
            title="Forgetting check source",
            text="Quarterly sales reports are delivered on Tuesday mornings.",
        )
        passage = document.passages.first()
        self.credential, self.token = governance.create_credential(
            self.member, name="forgetting check (temporary)", scopes=["memory:read", "memory:write"]
        )
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
        self.wrapped_key = bytes(
            DataKey.objects.filter(pk=self.key_id).values_list("wrapped", flat=True).first() or b""
        )

    def cleanup(self) -> None:
        leftovers = (
            list(MemoryVersion.objects.filter(pk=self.canary_id).values_list("pk", flat=True)) if self.canary_id else []
        )
        if leftovers:  # the forget failed: do not leave a synthetic memory behind
            erase_memories(
                leftovers,
                operation=Operation.FORGETTING_CHECK,
                workspace_id=self.workspace.pk,
                member_id=self.member.pk,
                actor_label=ACTOR,
                filters={"canaryCleanup": True},
            )
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
            "tableMemoryVersionByText": lambda: sum(
                self.marker in (v.text or "")
                for v in MemoryVersion.objects.filter(member=self.member).only("pk", "text").iterator(chunk_size=1000)
            ),
            "tableCitation": lambda: Citation.objects.filter(memory_id=self.canary_id).count(),
            "tableMemoryEmbedding": lambda: MemoryEmbedding.objects.filter(memory_id=self.canary_id).count(),
            # The stored BM25 terms are stemmed ("…ies" → "…i"): look for the marker as it is indexed.
            "recallTermsByText": lambda: sum(
                index_terms(self.marker)[0] in (e.terms or "").split()
                for e in MemoryEmbedding.objects.filter(memory__member=self.member)
                .only("memory_id", "terms")
                .iterator(chunk_size=1000)
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
        response = self.member_client.get(
            f"/api/w/{self.workspace.pk}/ask-history/agent-memories",
            {"namespace": NAMESPACE, "limit": 100},
            secure=True,
        )
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
        for embedding in (
            MemoryEmbedding.objects.filter(memory__member=self.member)
            .only("memory_id", "vector", "dim")
            .iterator(chunk_size=1000)
        ):
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
        return sum(
            1
            for key, value in list(store.items())
            if needle in str(key).encode() or needle in (value if isinstance(value, bytes) else b"")
        )

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
            probes["plaintextInSqliteFiles"] = lambda: occurrences_on_disk(
                [*sqlite_files(), *sqlite_files(KEYRING)], self.marker.encode()
            )
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
        with override_settings(
            SEMANTIC_BUDGET_SECONDS=max(settings.SEMANTIC_BUDGET_SECONDS, CHECK_SEMANTIC_BUDGET_SECONDS)
        ):
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
            forget_receipt = (
                DeletionReceipt.objects.filter(pk=int(forgotten["receiptId"])).first() if status == 200 else None
            )
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
        receipt = self.record(
            forget_receipt,
            started=started,
            filters={},
            verification={
                **remaining,
                "markerSha256": self.marker_sha256,
                "forgetStatus": status,
                "surfaces": surfaces,
                "neverHoldContent": never,
                "reachableBefore": reachable_before,
                "emptyAfter": empty_after,
                "clean": clean,
            },
        )
        return {
            **self.report_head(forget_receipt, receipt),
            "surfaces": surfaces,
            "neverHoldContent": never,
            "reachableBefore": reachable_before,
            "emptyAfter": empty_after,
            "stores": remaining["remaining"],
            "clean": clean,
        }


# --- the proof with a real backup (SPEC §8.2) -------------------------------------------------------
