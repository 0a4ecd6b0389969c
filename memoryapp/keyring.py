"""The key store (SPEC §8.2): data keys, wrapped by the key-encryption key, in a database that is
not the data store.

`DataKey` is the only model of the Django database alias `keyring` (`memoryapp.routers`): a
second SQLite file under var/ (embedded default: `secure_delete` on, its WAL truncated after every
key deletion) or a PostgreSQL database of its own (`KEYRING_DATABASE_URL`). Its backups are taken
apart from the database's and kept briefly (`KEYRING_BACKUP_RETENTION_DAYS`): a database backup
restored after an erase then holds ciphertext whose keys exist nowhere (docs/lifecycle.md).

`KeyStore` is the interface every caller uses; `DatabaseKeyStore` is the backend for both
databases. A KMS or Vault backend implements the same five methods (docs/encryption.md, "Another
key store"): `put` stores new DEKs wrapped, `get_many` returns them unwrapped in one round trip,
`delete_many` destroys them, `present` tells which still exist, `rewrap` moves them to the current
KEK. Nothing outside this module knows how keys are kept.

Over ~400 lines on purpose: the model, its store and the rotation that re-wraps its rows are one
seam (the key table is read and written nowhere else).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol
from uuid import UUID, uuid4

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections, models, transaction
from django.utils import timezone

from core import backends
from core.db import native_cursor
from core.wal import sqlite_checkpoint
from memoryapp.crypto import KeyEncryptionKeys, SealError, new_data_key
from memoryapp.kek import EnvironmentKeks, KekSource, KekUnavailable, MissingKeks, missing_keks
from memoryapp.kek_backends import FileBackend, Pkcs11Config, Pkcs11Keks

logger = logging.getLogger(__name__)

KEYRING = "keyring"  # the database alias
# SQLite caps bound parameters per statement; PostgreSQL is happy with large IN lists.
_SQLITE_CHUNK = 900
#: The keyring sweep (retention.keysweep) never takes a key younger than this for an orphan: its
#: row's INSERT may not have committed yet. So every key must be in its row (committed) before it
#: is KEY_GRACE old.
KEY_GRACE = timedelta(hours=1)
#: A spare key (`SpareKeys`) older than this is never handed out: the row it is handed to then has
#: at least KEY_GRACE - SPARE_MAX_AGE (30 minutes) to commit before the sweep may destroy its key.
SPARE_MAX_AGE = KEY_GRACE / 2


class DataKey(models.Model):
    """One data key, wrapped by a KEK. Holds no content and nothing a content could be guessed from."""

    key_id = models.UUIDField(
        primary_key=True, help_text="The `key_id` of the row (memory version, consolidation) it encrypts."
    )
    owner = models.CharField(
        max_length=40, help_text="The model whose row it encrypts (memoryapp.memoryversion, retention.consolidation)."
    )
    wrapped_by = models.CharField(max_length=16, help_text="Id of the key-encryption key that wrapped it.")
    wrapped = models.BinaryField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["owner", "created_at"], name="datakey_sweep"),
            models.Index(fields=["wrapped_by"], name="datakey_rewrap"),
        ]

    def __str__(self) -> str:
        return f"data key {self.key_id}"


class KekRecordQuerySet(models.QuerySet):
    def observe(self, kek_id: str, *, origin: str = "", at: datetime | None = None) -> KekRecord:
        """The record of this KEK, made now if it has none: its creation instant is when a rotation
        made it, or (a KEK made before records existed, or set by the operator) when first seen."""
        record, _ = self.get_or_create(
            kek_id=kek_id, defaults={"created_at": at or timezone.now(), "origin": origin[:200]}
        )
        return record

    def mark_destroyed(self, kek_ids: Iterable[str], *, at: datetime | None = None) -> int:
        """Record that these KEKs were destroyed (a KEK never recorded gets a record now)."""
        ids = sorted(set(kek_ids))
        now = at or timezone.now()
        for kek_id in ids:
            self.observe(kek_id, at=now)
        return self.filter(kek_id__in=ids, destroyed_at__isnull=True).update(destroyed_at=now)

    def reconcile(self, live: Iterable[str], *, at: datetime | None = None) -> list[str]:
        """Records of KEKs no longer configured (a rotation destroyed them and crashed before
        recording it) are marked destroyed now: they were gone by then at the latest."""
        gone = list(
            self.filter(destroyed_at__isnull=True).exclude(kek_id__in=list(live)).values_list("kek_id", flat=True)
        )
        if gone:
            self.filter(kek_id__in=gone, destroyed_at__isnull=True).update(destroyed_at=at or timezone.now())
        return gone

    def destroyed_at(self, kek_ids: Iterable[str]) -> dict[str, datetime | None]:
        """kek id -> when it was destroyed (None: it exists, or nothing is recorded of it)."""
        ids = list(set(kek_ids))
        found = dict(self.filter(kek_id__in=ids).values_list("kek_id", "destroyed_at"))
        return {kek_id: found.get(kek_id) for kek_id in ids}


class KekRecord(models.Model):
    """When a key-encryption key was made and when it was destroyed: the instants a
    deletion receipt's residual window (`residualUntil`) is computed from and checked against. Kept
    in the key store's database, beside the keys it wrapped; holds nothing of the KEK but its id."""

    kek_id = models.CharField(max_length=16, primary_key=True)
    created_at = models.DateTimeField(
        help_text="When a rotation made it (or when first seen, for a KEK made before records existed)."
    )
    destroyed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a rotation destroyed it: from then on nothing it wrapped can be unwrapped.",
    )
    origin = models.CharField(max_length=200, blank=True, default="")

    objects = KekRecordQuerySet.as_manager()

    def __str__(self) -> str:
        return f"KEK {self.kek_id}"


class LeaseQuerySet(models.QuerySet):
    def claim(self, name: str, holder: str, *, ttl: timedelta, now: datetime | None = None) -> bool:
        """Claim (or renew) the lease `name` for `holder` until now + ttl: one conditional UPDATE,
        True when this holder has it (nobody had it, it lapsed, or it already was this holder's)."""
        now = now or timezone.now()
        self.get_or_create(name=name)
        free = models.Q(until__isnull=True) | models.Q(until__lt=now) | models.Q(holder=holder)
        return self.filter(free, name=name).update(holder=holder, until=now + ttl) == 1

    def release(self, name: str, holder: str) -> None:
        self.filter(name=name, holder=holder).update(until=None, holder="")


class KekRotationLease(models.Model):
    """The one rotation at a time (memoryapp.encryption.scheduled_rotation): a row claimed with a
    conditional UPDATE and renewed after every chunk, so it works alike on SQLite and PostgreSQL,
    and a crashed holder's lease lapses by itself (the next run resumes its rotation)."""

    name = models.CharField(max_length=40, primary_key=True)
    holder = models.CharField(max_length=120, blank=True, default="")
    until = models.DateTimeField(null=True, blank=True)

    objects = LeaseQuerySet.as_manager()

    def __str__(self) -> str:
        return f"lease {self.name}"


class KeyStore(Protocol):
    def put(self, keys: Mapping[UUID, bytes], *, owner: str, created_at: datetime | None = None) -> None: ...

    def get_many(self, key_ids: Iterable[UUID]) -> dict[UUID, bytes | None]:
        """The unwrapped DEKs of these ids, in one round trip. An id absent from the answer has no
        key (destroyed); None: a key is stored but does not unwrap (corrupted, or an unknown KEK)."""
        ...

    def delete_many(self, key_ids: Iterable[UUID]) -> int: ...

    def present(self, key_ids: Iterable[UUID]) -> set[UUID]: ...

    def rewrap(self, *, limit: int, after: UUID | None = None) -> tuple[int, UUID | None]: ...


def file_keks() -> KekSource:
    """KEK_BACKEND=file: MEMORY_KEK when set, else the key file (made while the key store is empty)."""
    retired, key_file = tuple(settings.RETIRED_KEKS), Path(settings.MEMORY_KEK_FILE)
    if settings.MEMORY_KEK:
        return EnvironmentKeks(settings.MEMORY_KEK, retired, leftover_file=key_file)
    return FileBackend(key_file, may_create=lambda: not key_store().holds_keys(), retired_env=retired)


def pkcs11_keks() -> KekSource:
    """KEK_BACKEND=pkcs11: the KEK objects of the PKCS#11 token the PKCS11_* settings name."""
    config = Pkcs11Config(
        module=settings.PKCS11_MODULE,
        token_label=settings.PKCS11_TOKEN_LABEL,
        pin=settings.PKCS11_PIN,
        pin_file=settings.PKCS11_PIN_FILE,
        key_label=settings.PKCS11_KEY_LABEL,
    )
    return Pkcs11Keks(
        config,
        stored_kek_ids=lambda: key_store().kek_ids(),
        retired_env=tuple(settings.RETIRED_KEKS),
        leftover_file=Path(settings.MEMORY_KEK_FILE),
    )


def kek_source() -> KekSource:
    """Where the KEKs come from (memoryapp.kek, memoryapp.kek_backends): the source KEK_BACKEND
    configures (core.backends), built once."""
    return backends.load("KEK_BACKEND")


def key_encryption_keys() -> KeyEncryptionKeys:
    return kek_source().keys()


def keks_missing() -> MissingKeks | None:
    """Stored data keys that no configured KEK opens (None: all is well, or nothing is stored).
    Raises DatabaseError when the key store cannot be asked, KekUnavailable when the KEK source
    cannot (a PKCS#11 module, token or PIN that does not work: asked even with nothing stored)."""
    source = kek_source()
    source.configured()
    return missing_keks(source, key_store())


def require_keks() -> None:
    """The start-up check of every process that serves (ASGI, WSGI, the Celery worker and beat;
    management commands run it as the system check memoryapp.E001): refuses, naming the missing
    KEK ids and where the configured ones come from, when stored data keys would not open. When
    the key store cannot be reached it cannot tell, and says so in the log: the process starts
    (the key store answers errors until it is back, and nothing new is made under a guessed key:
    the key file is created only once the store is known to be empty).

    Runs in a thread of its own whose connections it closes: the ASGI app is imported inside
    uvicorn's event loop (Django refuses queries there), and a connection left open before a
    fork (Celery's prefork pool) would be shared by the children."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="require-keks") as pool:
        try:
            missing = pool.submit(_keks_missing_closing).result()
        except KekUnavailable as exc:
            raise ImproperlyConfigured(f"The key-encryption keys cannot be used: {exc}. Refusing to start.") from None
    if missing is not None:
        raise ImproperlyConfigured(missing.message())


#: The exit status of a server process that refuses to start: uvicorn's STARTUP_FAILURE and
#: gunicorn's WORKER_BOOT_ERROR, on which their supervisors stop instead of restarting the worker
#: (it would refuse again, forever).
REFUSED_TO_START = 3


def require_keks_or_exit(status: int = REFUSED_TO_START) -> None:
    """`require_keks()` for a process entry point: the refusal printed to stderr and logged, then
    SystemExit(status) (Celery swallows a signal receiver's Exception, not a SystemExit)."""
    try:
        require_keks()
    except ImproperlyConfigured as exc:
        logger.critical("refusing to start: %s", exc)
        sys.stderr.write(f"ImproperlyConfigured: {exc}\n")
        raise SystemExit(status) from None


def _keks_missing_closing() -> MissingKeks | None:
    try:
        return keks_missing()
    except DatabaseError as exc:
        logger.warning(
            "key-encryption keys not checked at start-up: the key store cannot be reached (%s)", exc.__class__.__name__
        )
        return None
    finally:
        connections.close_all()


def _chunked(ids: Sequence[UUID], alias: str) -> Iterable[Sequence[UUID]]:
    size = _SQLITE_CHUNK if connections[alias].vendor == "sqlite" else 10_000
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


class DatabaseKeyStore:
    """Keys in the `keyring` database (SQLite or PostgreSQL). Every call runs in the keyring
    connection's own autocommit transaction: a key is durable before the data row that needs it
    commits, and destroyed before the erase that destroys it reports so."""

    def __init__(self, alias: str = KEYRING):
        self.alias = alias

    def _objects(self) -> models.QuerySet[DataKey]:
        return DataKey.objects.using(self.alias)

    def put(self, keys: Mapping[UUID, bytes], *, owner: str, created_at: datetime | None = None) -> None:
        if not keys:
            return
        keks = key_encryption_keys()
        now = created_at or timezone.now()
        rows = []
        for key_id, dek in keys.items():
            wrapped_by, wrapped = keks.wrap(key_id, dek)
            rows.append(DataKey(key_id=key_id, owner=owner, wrapped_by=wrapped_by, wrapped=wrapped, created_at=now))
        self._objects().bulk_create(rows, batch_size=500)

    def get_many(self, key_ids: Iterable[UUID]) -> dict[UUID, bytes | None]:
        ids = list(dict.fromkeys(key_ids))
        keks = key_encryption_keys()
        found: dict[UUID, bytes | None] = {}
        for chunk in _chunked(ids, self.alias):
            for key_id, wrapped_by, wrapped in self._rows(chunk):
                try:
                    found[key_id] = keks.unwrap(key_id, wrapped_by, bytes(wrapped))
                except SealError as exc:
                    logger.error("data key does not unwrap: %s", exc, extra={"key_id": str(key_id)})
                    found[key_id] = None
        return found

    def _rows(self, ids: Sequence[UUID]) -> Iterable[tuple[UUID, str, bytes]]:
        """(key id, wrapped by, wrapped) of these ids. PostgreSQL: one array parameter (`= ANY`),
        not 300 placeholders to interpolate and parse, sent in binary (`%b`: 300 ids as 16 bytes
        each, not 300 texts for the server to parse; docs/benchmarks.md "Figures behind code
        choices")."""
        connection = connections[self.alias]
        if connection.vendor == "postgresql":
            # Binary results (as recall's index entries): no hex decoding of bytea, no UUID parsing
            # from text. psycopg's own cursor on Django's connection, so Django's query log does not
            # list it (health-checked and its errors Django's: core.db).
            with native_cursor(connection) as cursor:
                cursor.execute(
                    f"SELECT key_id, wrapped_by, wrapped FROM {DataKey._meta.db_table} WHERE key_id = ANY(%b)",
                    [list(ids)],
                    binary=True,
                )
                return cursor.fetchall()
        return list(self._objects().filter(pk__in=ids).values_list("key_id", "wrapped_by", "wrapped"))

    def delete_many(self, key_ids: Iterable[UUID]) -> int:
        return len(self.destroy_many(key_ids))

    def destroy_many(self, key_ids: Iterable[UUID]) -> list[tuple[UUID, str, bytes]]:
        """Delete these keys; (key id, wrapped by, wrapped) of each deleted, as it was deleted
        (`DELETE … RETURNING`, one statement: a rotation re-wrapping meanwhile cannot slip a newer
        value past it). The caller keeps only `fingerprint()`s of the wrapped bytes."""
        ids = list(dict.fromkeys(key_ids))
        connection = connections[self.alias]
        table, pk = DataKey._meta.db_table, DataKey._meta.pk
        destroyed: list[tuple[UUID, str, bytes]] = []
        with connection.cursor() as cursor:
            for chunk in _chunked(ids, self.alias):
                if connection.vendor == "postgresql":
                    cursor.execute(
                        f"DELETE FROM {table} WHERE key_id = ANY(%s) RETURNING key_id, wrapped_by, wrapped",
                        [list(chunk)],
                    )
                else:
                    marks = ", ".join(["%s"] * len(chunk))
                    cursor.execute(
                        f"DELETE FROM {table} WHERE key_id IN ({marks}) RETURNING key_id, wrapped_by, wrapped",
                        [pk.get_db_prep_value(k, connection) for k in chunk],
                    )
                for key_id, wrapped_by, wrapped in cursor.fetchall():
                    destroyed.append(
                        (key_id if isinstance(key_id, UUID) else UUID(str(key_id)), wrapped_by, bytes(wrapped))
                    )
        if destroyed:
            self.checkpoint(attempts=1)  # never waits: an erase may hold the data's write lock here
        return destroyed

    def vacuum(self) -> bool:
        """PostgreSQL: VACUUM the key table, outside any transaction, so destroyed keys stop being
        dead tuples in its files sooner. It shortens the window; it does not bound
        it (a pruned page may keep the bytes in its free space, a WAL segment or a replica keeps
        them): the KEK's destruction does (`memoryapp.encryption.scheduled_rotation`). SKIP_LOCKED:
        another VACUUM of it under way is enough. False on SQLite (secure_delete zeroes them) and
        inside a transaction."""
        connection = connections[self.alias]
        if connection.vendor != "postgresql" or connection.in_atomic_block:
            return False
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM (SKIP_LOCKED) {DataKey._meta.db_table}")
        return True

    def present(self, key_ids: Iterable[UUID]) -> set[UUID]:
        ids = list(dict.fromkeys(key_ids))
        return {
            key_id
            for chunk in _chunked(ids, self.alias)
            for key_id in self._objects().filter(pk__in=chunk).values_list("key_id", flat=True)
        }

    def rewrap(self, *, limit: int, after: UUID | None = None) -> tuple[int, UUID | None]:
        """Re-wrap up to `limit` keys (in key id order, after `after`) under the current KEK:
        those wrapped by a retired one. Returns how many were re-wrapped and the last key id
        looked at (None when none was left). A key that does not unwrap is logged and left."""
        keks = key_encryption_keys()
        queryset = self._objects().exclude(wrapped_by=keks.current_id)
        if after is not None:
            queryset = queryset.filter(key_id__gt=after)
        rows = list(queryset.order_by("key_id").values_list("key_id", "wrapped_by", "wrapped")[:limit])
        done = 0
        # One transaction per chunk: one commit (one fsync with SQLite's synchronous=FULL) for the
        # chunk instead of one per key (docs/encryption.md "Measured: scheduled rotation").
        with transaction.atomic(using=self.alias):
            for key_id, wrapped_by, wrapped in rows:
                try:
                    dek = keks.unwrap(key_id, wrapped_by, bytes(wrapped))
                except SealError as exc:
                    logger.error("data key cannot be re-wrapped: %s", exc, extra={"key_id": str(key_id)})
                    continue
                new_by, new_wrapped = keks.wrap(key_id, dek)
                done += (
                    self._objects()
                    .filter(pk=key_id, wrapped_by=wrapped_by)
                    .update(wrapped_by=new_by, wrapped=new_wrapped)
                )
        return done, (rows[-1][0] if rows else None)

    def not_current(self) -> int:
        """Keys still wrapped by another KEK than the current one."""
        return self._objects().exclude(wrapped_by=key_encryption_keys().current_id).count()

    # --- for the sweep and the matrix (not part of what another backend must offer) -------------
    def scan(self, *, owner: str, created_before, after: UUID | None, limit: int) -> list[UUID]:
        queryset = self._objects().filter(owner=owner, created_at__lt=created_before)
        if after is not None:
            queryset = queryset.filter(key_id__gt=after)
        return list(queryset.order_by("key_id").values_list("key_id", flat=True)[:limit])

    def count(self) -> int:
        return self._objects().count()

    def _migrated(self) -> bool:
        return DataKey._meta.db_table in connections[self.alias].introspection.table_names()

    def holds_keys(self) -> bool:
        """Whether any data key is stored (False too before `migrate` made the table)."""
        return self._migrated() and self._objects().exists()

    def kek_ids(self) -> set[str]:
        """The ids of the KEKs that wrapped the stored data keys: one index probe per id (MIN over
        `datakey_rewrap`), not a scan of the keys; empty before `migrate`."""
        if not self._migrated():
            return set()
        ids: set[str] = set()
        queryset = self._objects()
        while (found := queryset.aggregate(first=models.Min("wrapped_by"))["first"]) is not None:
            ids.add(found)
            queryset = self._objects().filter(wrapped_by__gt=found)
        return ids

    def count_wrapped_by(self, kek_id: str) -> int:
        return self._objects().filter(wrapped_by=kek_id).count()

    def checkpoint(self, attempts: int = 3, *, wait_ms: int = 0) -> bool:
        """SQLite: copy the keyring's WAL into its file and truncate it, so destroyed keys leave the
        WAL too (secure_delete has zeroed them in the file). PostgreSQL: nothing to do here.
        Each attempt waits at most `wait_ms` for readers and writers (0: none; an erase calls this
        while it holds the data's write lock): a held reader leaves a passive checkpoint, and the
        sweep's bounded TRUNCATE (`retention.erasure.truncate_wals`) finishes it (docs/encryption.md)."""
        connection = connections[self.alias]
        if connection.vendor != "sqlite" or connection.in_atomic_block:
            return False
        return sqlite_checkpoint(connection, attempts=attempts, wait_ms=wait_ms, what="keyring")


#: A destroyed wrapped key is found again on disk by its first bytes (format byte and nonce: 13
#: random bytes no other stored value shares) and confirmed by a digest of all of it: a search for
#: a fixed string, not a hash of every window of every file (docs/encryption.md "Proof on disk").
FINGERPRINT_PREFIX = 13
WRAPPED_BYTES = 61  # format (1) + nonce (12) + AES-GCM of a 32-byte key (32) + tag (16)


def fingerprint(wrapped: bytes) -> dict[str, str]:
    """What a receipt keeps of a destroyed wrapped key: its first 13 bytes (format and nonce,
    random and not secret) and the SHA-256 of the whole. Neither unwraps anything: the ciphertext
    and tag are not in it."""
    return {
        "prefix": wrapped[:FINGERPRINT_PREFIX].hex(),
        "sha256": hashlib.sha256(wrapped).hexdigest(),
        "length": str(len(wrapped)),
    }


def key_store() -> DatabaseKeyStore:
    return DatabaseKeyStore()


class SpareKeys:
    """A process's spare data keys: created and committed in the key store in batches (one
    transaction for `batch` keys), handed out one at a time to new rows (`take`), each once.

    A spare is handed out only while younger than SPARE_MAX_AGE = KEY_GRACE / 2 (its stored
    `created_at`); older ones are dropped and left to the sweep. A forked child starts with an empty
    pool (the pid is checked on every take); one lock guards the pool and its refills. `clear()`
    drops every spare (a refill rolled back with a test's transaction). Why this is safe for the
    sweep, a crash and an erase: docs/encryption.md, "New keys: spares committed in batches".
    """

    def __init__(
        self,
        *,
        store: Callable[[], KeyStore] | None = None,
        batch: int | None = None,
        clock: Callable[[], datetime] = timezone.now,
    ):
        self._store = store or key_store
        self._batch = batch
        self._clock = clock
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._spares: dict[str, deque[tuple[UUID, bytes, datetime]]] = {}

    @property
    def batch(self) -> int:
        return max(1, self._batch if self._batch is not None else settings.KEYRING_SPARE_KEYS)

    def take(self, owner: str) -> tuple[UUID, bytes]:
        """A new data key (id, DEK) for one new row of `owner`, stored and committed in the key
        store, younger than SPARE_MAX_AGE, never handed out before in any process."""
        self._forget_if_forked()
        with self._lock:
            spares = self._spares.setdefault(owner, deque())
            oldest = self._clock() - SPARE_MAX_AGE
            while spares and spares[0][2] <= oldest:
                spares.popleft()  # too old to hand out: the sweep destroys it after KEY_GRACE
            if not spares:
                stamp = self._clock()
                fresh = {uuid4(): new_data_key() for _ in range(self.batch)}
                self._store().put(fresh, owner=owner, created_at=stamp)
                spares.extend((key_id, dek, stamp) for key_id, dek in fresh.items())
            key_id, dek, _ = spares.popleft()
            return key_id, dek

    def count(self, owner: str) -> int:
        self._forget_if_forked()
        with self._lock:
            return len(self._spares.get(owner, ()))

    def clear(self) -> None:
        with self._lock:
            self._spares.clear()

    def _forget_if_forked(self) -> None:
        """In a forked child: no spare of the parent's, and a new lock (one another thread of the
        parent held at the fork would stay held in the child)."""
        if self._pid != os.getpid():
            self._lock = threading.Lock()
            self._spares = {}
            self._pid = os.getpid()


_SPARES = SpareKeys()
os.register_at_fork(
    after_in_child=_SPARES._forget_if_forked
)  # the pid check in take() is the rule; this resets before any thread runs


def spare_keys() -> SpareKeys:
    return _SPARES


def new_row_key(owner: str) -> tuple[UUID, bytes]:
    """The data key of one new row of `owner` (a model label): taken from this process's spares."""
    return _SPARES.take(owner)
