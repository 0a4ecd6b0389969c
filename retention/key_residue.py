"""Proof on disk: do the key store's physical files still hold an erased key's
wrapped bytes, and does anything that exists still unwrap them?

An erase keeps a fingerprint of each wrapped key it destroyed (`memoryapp.keyring.fingerprint`:
the first 13 bytes — format byte and nonce, random and not secret — and the SHA-256 of all 61).
Here the key store's files are searched for each prefix (`bytes.find`, a fixed-string search at
memory speed) and every hit is confirmed by hashing the 61 bytes at that offset: no window of any
file is hashed blindly, and nothing kept in the receipt unwraps anything (docs/encryption.md
"Proof on disk").

The files: SQLite, the key store's file with its -wal and -shm. PostgreSQL, after a CHECKPOINT
(dirty pages reach the table file), the key table's heap segments found with
`pg_relation_filepath` under `data_directory` — only when the server runs on this machine and its
files are readable by this process; otherwise the report says "not inspectable" and why.

A found copy is residual, not a failure, while the receipt's window is open (before residualUntil:
the KEK that wrapped it still exists, as the receipt says); after the KEK's destruction it opens
with nothing that exists (`unwrapsNow` 0) and the window is closed. A copy that still unwraps
after residualUntil, or after the KEK was recorded destroyed, breaks the receipt's promise.
"""

from __future__ import annotations

import hashlib
import mmap
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from django.db import DatabaseError, connections
from django.utils import timezone

from core.timestamps import iso
from memoryapp.crypto import SealError
from memoryapp.keyring import KEYRING, DataKey, KekRecord, kek_source, key_encryption_keys
from retention.models import DeletionReceipt

LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class KeyStoreFiles:
    paths: list[Path]
    engine: str
    not_inspectable: str | None = None  # why the files cannot be read here (None: they can)


def key_store_files(alias: str = KEYRING) -> KeyStoreFiles:
    """The physical files that hold the key store's table, flushed to disk first."""
    connection = connections[alias]
    if connection.vendor == "sqlite":
        name = Path(connection.settings_dict["NAME"])
        if str(name) in (":memory:", "") or "mode=memory" in str(name):
            return KeyStoreFiles([], "sqlite", "the key store is an in-memory SQLite database: it has no file")
        return KeyStoreFiles([p for p in (name, Path(f"{name}-wal"), Path(f"{name}-shm")) if p.exists()], "sqlite")
    host = str(connection.settings_dict.get("HOST") or "")
    if host not in LOCAL_HOSTS and not host.startswith("/"):
        return KeyStoreFiles(
            [],
            "postgresql",
            f"not inspectable: the key store's server ({host}) is not on this machine; inspect its data directory "
            "there",
        )
    try:
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
            cursor.execute(
                "SELECT current_setting('data_directory'), pg_relation_filepath(%s)", [DataKey._meta.db_table]
            )
            data_directory, relation = cursor.fetchone()
    except DatabaseError as exc:
        return KeyStoreFiles(
            [],
            "postgresql",
            "not inspectable: the server refused CHECKPOINT or data_directory to this role "
            f"({str(exc).strip().splitlines()[0]})",
        )
    base = Path(data_directory) / relation
    if not base.exists() or not _readable(base):
        return KeyStoreFiles(
            [],
            "postgresql",
            f"not inspectable: the key table's file {base} is not readable by this process (another machine, or "
            "another user)",
        )
    segments = [base]
    while (segment := Path(f"{base}.{len(segments)}")).exists():
        segments.append(segment)
    return KeyStoreFiles(segments, "postgresql")


def _readable(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            handle.read(1)
        return True
    except OSError:
        return False


def find_wrapped(paths: list[Path], fingerprints: list[dict[str, str]]) -> list[tuple[Path, int, bytes]]:
    """(file, offset, the wrapped bytes) of every whole copy of a fingerprinted key in these files."""
    wanted = []
    for fp in fingerprints:
        try:
            wanted.append((bytes.fromhex(fp["prefix"]), fp["sha256"], int(fp.get("length", 61))))
        except (KeyError, ValueError, TypeError):
            continue
    found = []
    for path in paths:
        try:
            with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                for prefix, digest, length in wanted:
                    offset = data.find(prefix)
                    while offset != -1:
                        candidate = bytes(data[offset : offset + length])
                        if hashlib.sha256(candidate).hexdigest() == digest:
                            found.append((path, offset, candidate))
                        offset = data.find(prefix, offset + 1)
        except (OSError, ValueError):  # gone meanwhile, unreadable, or empty (mmap refuses 0 bytes)
            continue
    return found


def _unwraps_now(wrapped: bytes, key_ids: list[str]) -> str | None:
    """The id of a KEK that exists now and unwraps these bytes (as one of the receipt's keys), or None."""
    keks = key_encryption_keys()
    for kek in (keks.current, *keks.retired):
        candidate = type(keks)(kek)
        for key_id in key_ids:
            try:
                candidate.unwrap(UUID(key_id), candidate.current_id, wrapped)
                return candidate.current_id
            except (SealError, ValueError):
                continue
    return None


def inspect_receipt(
    receipt: DeletionReceipt, *, files: KeyStoreFiles | None = None, now: datetime | None = None
) -> dict[str, Any]:
    """What the key store's files hold of this receipt's erased keys, and whether that matters."""
    now = now or timezone.now()
    files = files or key_store_files()
    kek = receipt.residual.get("kek") if isinstance(receipt.residual, dict) else None
    fingerprints = kek.get("wrappedKeys", []) if isinstance(kek, dict) else []
    key_ids = [str(k) for k in (receipt.manifest or {}).get("dataKeyIds", []) if isinstance(k, str)]
    closed_at = receipt.residual_closed_at(KekRecord.objects.destroyed_at(receipt.kek_ids()))
    report: dict[str, Any] = {
        "receiptId": str(receipt.pk),
        "engine": files.engine,
        "inspectable": files.not_inspectable is None,
        "notInspectable": files.not_inspectable,
        "files": [p.name for p in files.paths],
        "fingerprints": len(fingerprints),
        "residualUntil": iso(receipt.residual_until),
        "residualClosedAt": iso(closed_at),
    }
    # The promise is about every copy, not the ones a search can see: past residualUntil a KEK that
    # wrapped the erased keys still exists, so a pre-erase key-store backup, a WAL segment or a
    # replica still unwraps them, whatever the key table's own file holds (or whether it can be read).
    alive = sorted(set(receipt.kek_ids()) & {kek.id for kek in kek_source().configured()})
    overdue = bool(alive) and receipt.residual_until is not None and now > receipt.residual_until
    late = (
        f"residualUntil ({iso(receipt.residual_until)}) has passed and key-encryption key(s) {', '.join(alive)} "
        "that wrapped the erased keys still exist: any copy of the key store from before the erase still "
        "unwraps them"
    )
    if files.not_inspectable is not None:
        state, problem = ("overdue", f"{late}; the KEK rotation is late") if overdue else ("not_inspectable", None)
        return {**report, "found": None, "unwrapsNow": None, "state": state, "problem": problem}
    hits = find_wrapped(files.paths, fingerprints)
    unwrapping = [kek_id for _, _, wrapped in hits if (kek_id := _unwraps_now(wrapped, key_ids)) is not None]
    problem = None
    if overdue:
        state, problem = (
            "overdue",
            late + (" (one is on disk here)" if unwrapping else "") + "; the KEK rotation is late",
        )
    elif not hits:
        state = "none"
    elif not unwrapping and closed_at is not None:
        state = "closed"  # bytes left on disk that no KEK in existence opens
    elif closed_at is not None:
        state, problem = (
            "broken",
            "a copy of an erased key still unwraps although its key-encryption key was recorded destroyed",
        )
    else:
        state = "residual"  # declared by the receipt: gone for good at residualUntil (or unbounded, if it names none)
    return {
        **report,
        "found": len(hits),
        "where": sorted({f"{path.name}@{offset}" for path, offset, _ in hits})[:20],
        "unwrapsNow": len(unwrapping),
        "unwrapsWith": sorted(set(unwrapping)),
        "state": state,
        "problem": problem,
    }
