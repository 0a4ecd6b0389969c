"""`erase_memories` is the one way memories are erased.

It removes every stored artifact of the given memory versions (versions, citation rows,
embeddings; no cache ever holds memory content, and `verify_forgetting` scans the cache to prove it),
destroys their data keys in the key store (SPEC §8.2: every copy of their ciphertext, in any
backup, becomes unreadable) and writes a deletion receipt in the same
transaction, verified by re-querying each store, sealed into the workspace's receipt chain and
signed (`retention.receipts`). Forget, member and owner deletes, expiry,
grace purge, cascades and admin actions all call it.

The order, for crash safety (docs/lifecycle.md "Erase order"): the data rows are deleted (not yet
committed), then the keys are destroyed (committed at once: the key store is another database),
then the receipt is written and everything commits. A crash before the keys go leaves nothing
changed; a crash after leaves rows whose key is gone — unreadable everywhere, read as erased, and
erased with a receipt of their own by the keyring sweep (`retention.keysweep`). No order leaves a
readable orphan, and no receipt says a key was destroyed that was not: if destroying the keys
fails, the erase still removes the rows, its receipt says `keysDestroyed: 0` and is not clean, and
the sweep destroys the keys and re-verifies the receipt.

Over ~400 lines on purpose: the one erase path, with its order (rows, keys, receipt) in one
place so that it is read and changed as a whole.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.chunks import CHUNK, run_in_chunks
from core.timestamps import iso
from core.wal import sqlite_checkpoint
from governance.audit import Actor, audit
from governance.models import AuditEvent, Workspace
from memoryapp.access_log import ENTRY_ARTIFACT, count_listing, strike_references
from memoryapp.encryption import OFF, SCHEDULED, kek_schedule
from memoryapp.keyring import KEYRING, fingerprint, key_store
from memoryapp.models import Citation, MemoryEmbedding, MemoryVersion, expires_from
from retention import receipts
from retention.models import DeletionReceipt

logger = logging.getLogger(__name__)

# SQLite caps bound parameters per statement; PostgreSQL is happy with large IN lists.
_IN_CHUNK = 900


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    size = _IN_CHUNK if connection.vendor == "sqlite" else 10_000
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


DATA_KEY_ARTIFACT = "data_key"


def residual_window(
    purged_at: datetime, *, unsealed: int = 0, wrapped_keys: Sequence[dict[str, str]] = ()
) -> dict[str, Any]:
    """What may still hold the erased bytes, outside what the application can query, and until
    when. Content is stored sealed (SPEC §8.2): what database backups and WAL archives keep of it is
    ciphertext whose key the erase destroyed, so the window that bounds the content is the key
    store's (`keyring`), and the key store's own copies (dead rows, WAL, replicas, backups) are
    bounded by the key-encryption key's (`kek`: `until` is the receipt's residualUntil).
    `unsealed`: versions erased that were stored before encryption (their plaintext stays in
    backups as before). `wrapped_keys`: fingerprints of the destroyed wrapped keys."""
    window = {
        "database": _database_residual(),
        "backups": _backups_residual(purged_at, unsealed=unsealed),
        "keyring": _keyring_residual(purged_at),
        "kek": _kek_residual(purged_at, wrapped_keys),
    }
    if connection.vendor == "postgresql":
        window["walArchives"] = _wal_archive_residual(purged_at, unsealed=unsealed)
    return window


def residual_until_of(residual: dict[str, Any]) -> datetime | None:
    """The receipt's residualUntil: when the last KEK that may have wrapped its keys is destroyed."""
    kek = residual.get("kek") if isinstance(residual, dict) else None
    until = kek.get("until") if isinstance(kek, dict) else None
    return datetime.fromisoformat(until) if isinstance(until, str) else None


def _kek_residual(purged_at: datetime, wrapped_keys: Sequence[dict[str, str]]) -> dict[str, Any]:
    """The key-encryption keys that may have wrapped the erased keys (every KEK that exists at the
    erase: the current one and any a rotation under way still holds) and when they are destroyed."""
    try:
        schedule = kek_schedule()
    except Exception as exc:  # the key store or the key file cannot be read: say so, promise nothing
        logger.error("KEK schedule unknown while writing a receipt: %s", type(exc).__name__)
        return {
            "state": "unknown",
            "kekIds": [],
            "until": None,
            "statement": "The key-encryption keys could not be read: no instant can be named.",
            "wrappedKeys": list(wrapped_keys),
        }
    until = schedule.destroyed_by(purged_at)
    copies = (
        "Until then, a copy of the key store's files made before the erase (a dead row not yet vacuumed, a "
        "write-ahead log segment, a replica, a file-system snapshot, a key-store backup) may still hold the erased "
        "data keys wrapped by it, and whoever holds such a copy, a database backup and that key-encryption key could "
        "read these memories."
    )
    if schedule.state == SCHEDULED:
        statement = (
            f"The erased data keys were wrapped by key-encryption key {', '.join(schedule.live)}. The scheduled "
            f"rotation (every {schedule.hours} hours) destroys it by {iso(until)} (residualUntil). {copies} From "
            "residualUntil on, no copy of these memories can be read, whoever holds every disk and backup."
        )
    elif schedule.state == OFF:
        statement = (
            f"Key-encryption key rotation is off (KEK_ROTATION_HOURS is 0): the key {schedule.current} that wrapped "
            f"the erased data keys is not destroyed on a schedule. {copies} No instant can be named after which no "
            "copy can be read (residualUntil is null)."
        )
    else:
        statement = (
            f"The key-encryption keys ({', '.join(schedule.live)}) are set by the operator (MEMORY_KEK, RETIRED_KEKS) "
            f"and destroyed when the operator rotates them. {copies} No instant can be named here (residualUntil is "
            "null)."
        )
    return {
        "state": schedule.state,
        "rotationHours": schedule.hours,
        "kekIds": list(schedule.live),
        "until": iso(until),
        "statement": statement,
        "wrappedKeys": list(wrapped_keys),
    }


def _database_residual() -> dict[str, Any]:
    if connection.vendor == "sqlite":
        return {
            "engine": "sqlite",
            "statement": (
                "Erased rows are overwritten with zeros (secure_delete) and the write-ahead log is checkpointed and "
                "truncated when the erase commits, without waiting for readers: if another connection (a backup or "
                "replication tool) holds a read open from before the erase, the WAL keeps the erased rows' frames "
                "until that read ends and the WAL sweep (every 5 minutes) truncates it. Nothing of them remains in "
                "the database file."
            ),
        }
    return {
        "engine": "postgresql",
        "statement": (
            "PostgreSQL keeps erased rows as dead tuples until VACUUM reclaims them (the periodic sweeps vacuum the "
            "memory tables after they erase, autovacuum does otherwise); reclaimed space may keep the bytes until new "
            "rows overwrite it (VACUUM FULL rewrites the tables). Write-ahead log segments keep them until the server "
            "recycles the segments, normally within a few checkpoints (checkpoint_timeout, max_wal_size, "
            "wal_keep_size)."
        ),
    }


_SEALED = (
    "as ciphertext only: their data keys were destroyed with them, so a restored backup reads nothing of them "
    "with the key store as it is (see keyring and kek for the copies of the key store that remain until "
    "residualUntil)."
)


def _unsealed_note(unsealed: int) -> str:
    return f" {unsealed} of them were stored before encryption and are kept there readable." if unsealed else ""


def _backups_residual(purged_at: datetime, *, unsealed: int = 0) -> dict[str, Any]:
    window = _kept_for(
        settings.BACKUP_RETENTION_DAYS,
        purged_at,
        none="No database backups are configured; nothing remains in backups.",
        kept="Database backups taken before the purge keep these rows until they rotate out, at most {days} days, "
        + _SEALED
        + _unsealed_note(unsealed),
    )
    window["content"] = "sealed" if not unsealed else "partly_unsealed"
    return window


def _wal_archive_residual(purged_at: datetime, *, unsealed: int = 0) -> dict[str, Any]:
    window = _kept_for(
        settings.WAL_ARCHIVE_RETENTION_DAYS,
        purged_at,
        none="No WAL archiving is configured; no archived segment keeps these rows.",
        kept="Archived write-ahead log segments written before the purge keep these rows until they are removed, at "
        "most {days} days, " + _SEALED + _unsealed_note(unsealed),
    )
    window["content"] = "sealed" if not unsealed else "partly_unsealed"
    return window


def _keyring_residual(purged_at: datetime) -> dict[str, Any]:
    engine = connections[KEYRING].vendor
    window = _kept_for(
        settings.KEYRING_BACKUP_RETENTION_DAYS,
        purged_at,
        none=(
            "The data keys were destroyed in the key store (a database apart from the data's, never in its backups)"
            + (
                ", overwritten with zeros and its write-ahead log truncated (at once, or by the WAL sweep once a "
                "reader held open from before the erase has ended)"
                if engine == "sqlite"
                else ""
            )
            + "; no key-store backups are kept (KEYRING_BACKUP_RETENTION_DAYS is 0). The application can no longer "
            "read these memories;"
            + " copies of the key store's files made before the erase can until the key-encryption key that wrapped "
            "the keys is destroyed (see kek: residualUntil)."
        ),
        kept=(
            "The data keys were destroyed in the key store, but key-store backups taken before the purge keep them "
            "until they rotate out, at most {days} days, or until the key-encryption key that wrapped them is "
            "destroyed (see kek: residualUntil), whichever comes first: until then, a database backup restored "
            "together with such a key-store backup would read these memories. That is why key-store backups are kept "
            "briefly."
        ),
    )
    window["engine"] = engine
    return window


def _kept_for(days: int, purged_at: datetime, *, none: str, kept: str) -> dict[str, Any]:
    if days <= 0:
        return {"retentionDays": 0, "until": None, "statement": none}
    return {
        "retentionDays": days,
        "until": (purged_at + timedelta(days=days)).isoformat(),
        "statement": kept.format(days=days),
    }


def checkpoint_sqlite_wal(attempts: int = 3, *, wait_ms: int = 0) -> bool:
    """Copy the WAL into the database file and truncate it, so erased bytes leave the WAL too.
    Never waits for a reader past `wait_ms` per attempt (0 after an erase: its request must not
    hang on a backup tool's open read); what a held reader keeps back stays in the WAL until the
    sweep's `truncate_wals` (docs/encryption.md, "The WAL window"). False when it could not
    complete, or inside a transaction (a callback run early by a test): a checkpoint cannot run there."""
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        return False
    return sqlite_checkpoint(connection, attempts=attempts, wait_ms=wait_ms, what="database")


def flush_erased_wals() -> bool:
    """After an erase commits (its write lock released): checkpoint the data's WAL and the key
    store's, without waiting for readers. True when both were emptied."""
    data = checkpoint_sqlite_wal()
    keys = key_store().checkpoint() if connections[KEYRING].vendor == "sqlite" else True
    return data and keys


#: How long the sweep's TRUNCATE waits for readers, per database: bounded, and outside any
#: transaction, so it holds no lock while it waits.
SWEEP_CHECKPOINT_WAIT_MS = 2000


def truncate_wals(wait_ms: int = SWEEP_CHECKPOINT_WAIT_MS) -> bool | None:
    """The sweep's half of the erase's WAL flush (SQLite only; None elsewhere): TRUNCATE the data's
    and the key store's WAL, waiting at most `wait_ms` for each. A reader still open after that
    keeps its frames until the next sweep; True when both WALs are empty."""
    if connection.vendor != "sqlite" and connections[KEYRING].vendor != "sqlite":
        return None
    data = checkpoint_sqlite_wal(attempts=1, wait_ms=wait_ms) if connection.vendor == "sqlite" else True
    keys = key_store().checkpoint(attempts=1, wait_ms=wait_ms) if connections[KEYRING].vendor == "sqlite" else True
    return data and keys


MEMORY_TABLES = (MemoryVersion, Citation, MemoryEmbedding)


def reclaim_erased_space() -> bool:
    """PostgreSQL: VACUUM the memory tables now, so erased rows stop being dead tuples on disk
    when a sweep has erased many of them (not whenever autovacuum's thresholds are reached).
    VACUUM cannot run inside a transaction: skipped (False) there, and on SQLite, whose erases
    already overwrite and checkpoint."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return False
    with connection.cursor() as cursor:
        cursor.execute("VACUUM " + ", ".join(model._meta.db_table for model in MEMORY_TABLES))
    return True


# On PostgreSQL the ids travel as one array parameter (`= ANY(%s)`): thousands of IN-list
# placeholders cost more to build and parse than the deletes themselves.
def _tables() -> tuple[str, str, str]:
    return MemoryVersion._meta.db_table, Citation._meta.db_table, MemoryEmbedding._meta.db_table


def count_remaining(ids: Sequence[int]) -> dict[str, int]:
    if connection.vendor == "postgresql":
        versions, citations, embeddings = _tables()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT (SELECT count(*) FROM {versions} WHERE id = ANY(%s)), (SELECT count(*) FROM {citations} "
                f"WHERE memory_id = ANY(%s)), (SELECT count(*) FROM {embeddings} WHERE memory_id = ANY(%s))",
                [list(ids)] * 3,
            )
            version_count, citation_count, embedding_count = cursor.fetchone()
        return {"memory_version": version_count, "citation": citation_count, "memory_embedding": embedding_count}
    remaining = {"memory_version": 0, "citation": 0, "memory_embedding": 0}
    for chunk in _chunks(list(ids)):
        remaining["memory_version"] += MemoryVersion.objects.filter(pk__in=chunk).count()
        remaining["citation"] += Citation.objects.filter(memory_id__in=chunk).count()
        remaining["memory_embedding"] += MemoryEmbedding.objects.filter(memory_id__in=chunk).count()
    return remaining


def remaining_keys(key_ids: Sequence[str | UUID]) -> int:
    """How many of these data keys the key store still holds; all of them when it cannot answer."""
    if not key_ids:
        return 0
    try:
        return len(key_store().present([UUID(str(k)) for k in key_ids]))
    except Exception as exc:  # the key store is another database: unreachable is "not destroyed"
        logger.error("key store unreachable while verifying an erase: %s", type(exc).__name__)
        return len(key_ids)


def verify(ids: Sequence[int], key_ids: Sequence[str | UUID] = ()) -> dict[str, Any]:
    remaining = count_remaining(ids)
    remaining[ENTRY_ARTIFACT] = count_listing(ids)  # access entries still listing any of them
    if key_ids:
        remaining[DATA_KEY_ARTIFACT] = remaining_keys(key_ids)
    return {"checkedAt": timezone.now().isoformat(), "remaining": remaining, "clean": not any(remaining.values())}


def destroy_keys(key_ids: Sequence[UUID]) -> list[dict[str, str]]:
    """Destroy the data keys of erased rows; the fingerprint of each destroyed wrapped key (none
    when the key store fails: logged, and the keyring sweep destroys them later). Runs in the key
    store's own transaction, so the keys are gone for good before the erase commits (module
    docstring). The fingerprints let `verify_forgetting --backup` find the wrapped bytes a key
    store's files may keep without keeping them readable."""
    if not key_ids:
        return []
    try:
        return [fingerprint(wrapped) for _, _, wrapped in key_store().destroy_many(key_ids)]
    except Exception as exc:
        logger.error(
            "data keys of erased memories could not be destroyed (the keyring sweep retries): %s", type(exc).__name__
        )
        return []


def vacuum_key_store() -> bool:
    """After an erase commits, on PostgreSQL: VACUUM the key table (`DatabaseKeyStore.vacuum`), so
    the destroyed keys' dead tuples go sooner; never raises (the window is bounded by the KEK)."""
    try:
        return key_store().vacuum()
    except Exception as exc:
        logger.warning("the key table could not be vacuumed after an erase: %s", type(exc).__name__)
        return False


def _lock(ids: list[int]) -> list[tuple[int, datetime | None, UUID | None]]:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, unreachable_at, key_id FROM {_tables()[0]} WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                [ids],
            )
            return cursor.fetchall()
    rows: list[tuple[int, datetime | None, UUID | None]] = []
    for chunk in _chunks(ids):
        rows.extend(
            MemoryVersion.objects.select_for_update()
            .filter(pk__in=chunk)
            .order_by()
            .values_list("pk", "unreachable_at", "key_id")
        )
    return rows


def _delete(present: list[int]) -> dict[str, int]:
    """Dependents first, then the versions (their foreign keys are checked at commit)."""
    counts = {"memory_version": 0, "citation": 0, "memory_embedding": 0}
    if connection.vendor == "postgresql":
        versions, citations, embeddings = _tables()
        with connection.cursor() as cursor:
            for key, table, column in (
                ("citation", citations, "memory_id"),
                ("memory_embedding", embeddings, "memory_id"),
                ("memory_version", versions, "id"),
            ):
                cursor.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", [present])
                counts[key] = cursor.rowcount
        return counts
    for chunk in _chunks(present):
        counts["citation"] += Citation.objects.filter(memory_id__in=chunk)._raw_delete(connection.alias)
        counts["memory_embedding"] += MemoryEmbedding.objects.filter(memory_id__in=chunk)._raw_delete(connection.alias)
        counts["memory_version"] += MemoryVersion.objects.filter(pk__in=chunk)._raw_delete(connection.alias)
    return counts


def erase_memories(
    version_ids: Sequence[int],
    *,
    operation: str,
    workspace_id: int,
    actor_label: str,
    actor: Actor = None,
    member_id: int | None = None,
    filters: dict[str, Any] | None = None,
    requested_at: datetime | None = None,
    dedupe_key: str | None = None,
    unreachable_at: datetime | None = None,
) -> DeletionReceipt | None:
    """Erase these memory versions with a receipt. Returns None when none of them is left, or
    `dedupe_key` was already used (another worker erased the same work) — the caller then has
    nothing to do. `unreachable_at` states when read paths stopped returning them if the rows
    do not say so themselves (expiry is computed, so an expired row carries no mark)."""
    requested_at = requested_at or timezone.now()
    ids = sorted(set(int(i) for i in version_ids))
    try:
        with transaction.atomic():
            if dedupe_key and DeletionReceipt.objects.filter(dedupe_key=dedupe_key).exists():
                return None
            # Lock and re-read: a concurrent eraser may have taken some of these already.
            present: list[int] = []
            key_ids: list[UUID] = []
            for pk, marked_at, key_id in _lock(ids):
                present.append(pk)
                if key_id is not None:
                    key_ids.append(key_id if isinstance(key_id, UUID) else UUID(str(key_id)))
                if marked_at is not None and (unreachable_at is None or marked_at < unreachable_at):
                    unreachable_at = marked_at
            if not present:
                return None  # someone else erased them first: no empty or double receipt
            counts = _delete(present)
            counts.update(strike_references(present, member_id=member_id))  # the access log forgets them too
            wrapped = destroy_keys(key_ids)  # after the rows, before the receipt (module docstring)
            destroyed = counts[DATA_KEY_ARTIFACT] = len(wrapped)
            if connection.vendor == "sqlite" or connections[KEYRING].vendor == "sqlite":
                transaction.on_commit(flush_erased_wals)
            if wrapped and connections[KEYRING].vendor == "postgresql" and settings.KEYRING_VACUUM_AFTER_ERASE:
                transaction.on_commit(vacuum_key_store)
            purged_at = timezone.now()
            residual = residual_window(purged_at, unsealed=len(present) - len(key_ids), wrapped_keys=wrapped)
            return receipts.append(
                operation=operation,
                workspace_ref=workspace_id,
                member_ref=member_id,
                actor=actor if isinstance(actor, AbstractBaseUser) else None,
                actor_label=actor_label,
                manifest={
                    "artifacts": counts,
                    "filters": filters or {},
                    "requestedIds": len(ids),
                    "keysDestroyed": destroyed,
                    "dataKeyIds": sorted(str(k) for k in key_ids),
                },
                memory_version_ids=present,
                requested_at=requested_at,
                unreachable_at=unreachable_at or purged_at,
                purged_at=purged_at,
                residual=residual,
                residual_until=residual_until_of(residual),
                verification=verify(present, key_ids),
                dedupe_key=dedupe_key,
            )
    except IntegrityError:
        if dedupe_key and DeletionReceipt.objects.filter(dedupe_key=dedupe_key).exists():
            return None
        raise


# --- chunked erasure for periodic jobs --------------------------------------------------------
@dataclass
class Tally:
    versions: int = 0
    receipts: int = 0
    chunks: int = 0

    def add(self, other: Tally) -> Tally:
        self.versions += other.versions
        self.receipts += other.receipts
        self.chunks += other.chunks
        return self


def erase_in_chunks(
    queryset: QuerySet[MemoryVersion],
    *,
    operation: str,
    workspace_id: int,
    member_id: int | None,
    actor_label: str,
    filters: dict[str, Any],
    chunk: int = CHUNK,
    expired_after_days: int | None = None,
    order_by: tuple[str, ...] = ("pk",),
) -> Tally:
    """Erase what `queryset` selects (one workspace, one member), one transaction and one receipt
    per chunk, until a chunk comes back short.

    Each chunk is claimed with `SELECT … FOR UPDATE SKIP LOCKED`, and the queryset's conditions
    are re-evaluated under the lock, so two runs at once take disjoint chunks and a row changed
    meanwhile (a reactivated memory, say) is left alone. SQLite ignores the clause: its writers
    are serialised by the IMMEDIATE transactions. An interrupted run loses only the chunk in
    flight (rolled back), which the next run claims again: nothing is erased twice or missed.
    With `expired_after_days`, the receipt's unreachable time is the earliest computed expiry."""
    tally = Tally()
    requested_at = timezone.now()

    def step() -> tuple[int, int]:
        rows = list(
            queryset.select_for_update(skip_locked=True, of=("self",))
            .order_by(*order_by)
            .values_list("pk", "retention_anchor")[:chunk]
        )
        if not rows:
            return 0, 0
        unreachable_at = None
        if expired_after_days is not None:
            unreachable_at = expires_from(min(anchor for _, anchor in rows), expired_after_days)
        receipt = erase_memories(
            [pk for pk, _ in rows],
            operation=operation,
            workspace_id=workspace_id,
            member_id=member_id,
            actor_label=actor_label,
            filters=filters,
            requested_at=requested_at,
            unreachable_at=unreachable_at,
        )
        tally.chunks += 1
        if receipt is None:
            return len(rows), 0
        tally.receipts += 1
        tally.versions += receipt.versions_erased
        return len(rows), receipt.versions_erased

    run_in_chunks(step, chunk=chunk)
    return tally


def receipt_key_ids(receipt: DeletionReceipt) -> list[str]:
    manifest = receipt.manifest if isinstance(receipt.manifest, dict) else {}
    return [str(k) for k in manifest.get("dataKeyIds", []) if isinstance(k, str)]


@transaction.atomic
def reverify_receipt(receipt: DeletionReceipt, *, actor: Actor, reason: str = "") -> dict[str, Any]:
    """Re-query every store for the receipt's memory versions; append the result as a sealed
    record (`receipts.add_verification`, under the receipt's row lock) and audit it. The audit
    event keeps the workspace's id even when the workspace itself is gone."""
    receipt = DeletionReceipt.objects.select_for_update().get(pk=receipt.pk)
    previous = receipt.verification if isinstance(receipt.verification, dict) else {}
    result = verify(receipt.memory_version_ids, receipt_key_ids(receipt))
    receipts.add_verification(receipt, result, trigger=receipts.REVERIFICATION_TRIGGER)
    receipt.save(update_fields=["verification", "verifications"])
    workspace = Workspace.objects.filter(pk=receipt.workspace_ref).first()
    event = audit(
        "receipt.reverified",
        workspace=workspace,
        actor=actor,
        target=f"receipt #{receipt.pk}",
        changes={"clean": [previous.get("clean"), result["clean"]], "remaining": result["remaining"]},
        reason=reason,
    )
    if workspace is None:
        AuditEvent.objects.filter(pk=event.pk).update(workspace_ref=receipt.workspace_ref)
    return result
