"""Where the key-encryption keys come from, and the check that no stored data key is left without
one (SPEC §8.2, docs/encryption.md "The KEK").

A KEK source gives the keys (`keys()`: the current KEK, which wraps every new data key, and the
retired ones, which still unwrap), says what it holds without changing anything (`configured()`)
and takes part in a rotation (`begin_rotation()`, `retire_unneeded()`). Sources, chosen by
`memoryapp.keyring.kek_source`: `FileKeks` (the file `var/memory_kek`, rewritten atomically, created
**only while the key store holds no data key**: a missing file with keys stored is never replaced)
and `EnvironmentKeks` (`MEMORY_KEK`, which only the operator rotates); the PKCS#11 token is in
`memoryapp.kek_backends`. `RETIRED_KEKS` is the one explicit fallback, for every source.

`missing_keks(source, store)` is the start-up check: the KEK ids the stored data keys name
(`DataKey.wrapped_by`, a 64-bit check value) against the configured ones. A process with a key it
cannot unwrap does not start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
from base64 import b64encode
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from memoryapp.crypto import KEY_BYTES, KeyEncryptionKeys, decode_kek, kek_id

logger = logging.getLogger(__name__)

FILE_HEADER = (
    "# Key-encryption keys (docs/encryption.md). First line: the current KEK. Further lines: retired KEKs kept "
    "until rotate_kek has re-wrapped every data key.\n"
)


class KekUnavailable(Exception):
    """No usable key-encryption key: the configured one is missing while data keys are stored."""


@dataclass(frozen=True)
class ConfiguredKek:
    id: str
    role: str  # "current" or "retired"
    origin: str  # where it comes from, for the operator


@dataclass(frozen=True)
class Retirement:
    """What a rotation's last step did with the retired KEKs no data key needs any more."""

    destroyed: list[str] = field(default_factory=list)  # ids removed from a key file
    destroyed_from: str = ""  # that key file
    for_the_operator: list[str] = field(
        default_factory=list
    )  # ids configured in RETIRED_KEKS: the operator removes them


class KekSource(Protocol):
    origin: str
    makes_keys: bool  # begin_rotation() can make a new KEK (False: the operator sets it)

    def keys(self) -> KeyEncryptionKeys: ...

    def configured(self) -> list[ConfiguredKek]: ...

    def begin_rotation(self) -> bool: ...

    def retire_unneeded(self, needed: set[str]) -> Retirement: ...

    def hints(self, missing: set[str]) -> list[str]: ...


def new_kek() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def _encode(kek: bytes) -> str:
    return b64encode(kek).decode()


def _retired_from_environment(values: Iterable[str]) -> tuple[bytes, ...]:
    return tuple(decode_kek(value, name="RETIRED_KEKS") for value in values)


class EnvironmentKeks:
    """MEMORY_KEK and RETIRED_KEKS as the environment sets them. `leftover_file`: the embedded
    default's key file, if one exists from before MEMORY_KEK was set; never used to unwrap, only
    named when it holds a missing key, and destroyed by a rotation once no data key needs it."""

    def __init__(self, current: str, retired: Iterable[str] = (), *, leftover_file: Path | None = None):
        self._keys = KeyEncryptionKeys(decode_kek(current), _retired_from_environment(retired))
        self.leftover_file = leftover_file
        self.origin = "MEMORY_KEK (environment)"
        self.makes_keys = False

    def keys(self) -> KeyEncryptionKeys:
        return self._keys

    def configured(self) -> list[ConfiguredKek]:
        return [
            ConfiguredKek(self._keys.current_id, "current", self.origin),
            *(ConfiguredKek(kek_id(k), "retired", "RETIRED_KEKS (environment)") for k in self._keys.retired),
        ]

    def begin_rotation(self) -> bool:
        return False  # the operator sets the new key (MEMORY_KEK) and restarts every process

    def retire_unneeded(self, needed: set[str]) -> Retirement:
        destroyed = []
        if self.leftover_file is not None:
            held = _readable(self.leftover_file)
            ids = {kek_id(k) for k in held}
            if held and not ids & needed and self._keys.current_id not in ids:
                destroy_file(self.leftover_file)
                destroyed = sorted(ids)
        return Retirement(
            destroyed=destroyed,
            destroyed_from=str(self.leftover_file),
            for_the_operator=sorted(kek_id(k) for k in self._keys.retired if kek_id(k) not in needed),
        )

    def hints(self, missing: set[str]) -> list[str]:
        if self.leftover_file is None:
            return []
        held = {kek_id(k) for k in _readable(self.leftover_file)} & missing
        return [
            f"The file {self.leftover_file} holds KEK {i}, which these keys need; MEMORY_KEK (environment) is used "
            "instead of it."
            for i in sorted(held)
        ]


class FileKeks:
    """The KEK file of the embedded default (see the module docstring). `may_create`: asked only
    when the file is missing; True when the key store holds no data key (so a new KEK loses
    nothing). `retired_env`: RETIRED_KEKS, unwrapping beside the file's keys."""

    def __init__(self, path: Path, *, may_create: Callable[[], bool], retired_env: Iterable[str] = ()):
        self.path = Path(path)
        self.origin = f"the file {self.path}"
        self.makes_keys = True
        self._may_create = may_create
        self._retired_env = _retired_from_environment(retired_env)
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int, int] | None = None
        self._keys: KeyEncryptionKeys | None = None
        self._warned_missing = False

    def keys(self) -> KeyEncryptionKeys:
        with self._lock:
            try:
                stat = os.stat(self.path)
            except FileNotFoundError:
                if self._keys is not None:
                    # Deleted under a running process: keep what was read (it still opens every
                    # key), never write a new one; the next start refuses until it is restored.
                    if not self._warned_missing:
                        logger.error(
                            "the key-encryption key file %s is missing: restore it from its backup before any process "
                            "restarts",
                            self.path,
                        )
                        self._warned_missing = True
                    return self._keys
                self._create_first()
                stat = os.stat(self.path)
            stamp = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if stamp != self._stamp or self._keys is None:
                held = read_key_file(self.path)
                if not held:
                    raise KekUnavailable(f"{self.path} holds no key-encryption key")
                self._keys = KeyEncryptionKeys(held[0], (*held[1:], *self._retired_env))
                self._stamp = stamp
                self._warned_missing = False
            return self._keys

    def _create_first(self) -> None:
        """The first KEK of a fresh var/: only while no data key is stored. Processes starting
        together agree on one (written privately, hard-linked into place: the first link wins)."""
        if not self._may_create():
            if self.path.exists():
                return  # another process created it meanwhile (and stored keys under it)
            raise KekUnavailable(
                f"The key-encryption key file {self.path} is missing and the key store holds data keys: restore the "
                "file from its backup (or set MEMORY_KEK to the key). A new KEK would hide every memory, so none is "
                "made."
            )
        tmp = self._temporary(new_kek())
        try:
            os.link(tmp, self.path)
        except FileExistsError:
            pass  # another process was first: use its key
        finally:
            tmp.unlink()

    def _temporary(self, *keys: bytes) -> Path:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(FILE_HEADER + "".join(_encode(k) + "\n" for k in keys))
            handle.flush()
            os.fsync(handle.fileno())
        return tmp

    def _replace(self, *keys: bytes) -> None:
        """Atomically: the file holds `keys` (current first), or (after a crash) what it held.
        The version replaced is then overwritten with zeros: renaming alone would leave its
        blocks, a retired KEK in them, to whoever reads the disk (a reader that opened it just
        before reads the path again, `read_key_file`). Only when the rename removed its last name:
        a backup hard-linked to the key file, or a symlink's target, is the operator's copy."""
        tmp = self._temporary(*keys)
        with contextlib.ExitStack() as stack:
            try:
                replaced = stack.enter_context(open(self.path, "r+b"))
            except FileNotFoundError:
                replaced = None
            try:
                os.replace(tmp, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
            _fsync_directory(self.path.parent)
            if replaced is None:
                return
            version = os.fstat(replaced.fileno())
            if version.st_nlink:
                # another name still holds it (a backup hard-linked to the key file, or the target
                # of a key file that is a symlink): the operator's copy, never zeroed here
                logger.warning(
                    "the replaced version of %s is still linked elsewhere (%d name(s)): not zeroed; the operator "
                    "destroys that copy once its KEK is retired",
                    self.path,
                    version.st_nlink,
                )
                return
            _overwrite(replaced, version.st_size)

    def configured(self) -> list[ConfiguredKek]:
        held = read_key_file(self.path) if self.path.exists() else []
        listed = [ConfiguredKek(kek_id(k), "current" if i == 0 else "retired", self.origin) for i, k in enumerate(held)]
        return listed + [ConfiguredKek(kek_id(k), "retired", "RETIRED_KEKS (environment)") for k in self._retired_env]

    def begin_rotation(self) -> bool:
        """A new current KEK, the old one kept as retired: True. False when a rotation is already
        under way (the file still holds a retired KEK): it is resumed, not stacked."""
        self._remove_stale_temporaries()
        held = read_key_file(self.path) if self.path.exists() else []
        if not held:
            self.keys()  # missing: created if the store is empty, refused otherwise
            held = read_key_file(self.path)
        if len(held) > 1:
            return False
        self._replace(new_kek(), *held)
        return True

    def retire_unneeded(self, needed: set[str]) -> Retirement:
        held = read_key_file(self.path)
        kept = [held[0], *(k for k in held[1:] if kek_id(k) in needed)]
        destroyed = sorted(kek_id(k) for k in held[1:] if kek_id(k) not in needed)
        if destroyed:
            self._replace(*kept)
        return Retirement(
            destroyed=destroyed,
            destroyed_from=str(self.path),
            for_the_operator=sorted(kek_id(k) for k in self._retired_env if kek_id(k) not in needed),
        )

    def hints(self, missing: set[str]) -> list[str]:
        if not self.path.exists():
            return [
                f"The key-encryption key file {self.path} is missing: restore it from its backup (or set MEMORY_KEK "
                "to the key)."
            ]
        return []

    def _remove_stale_temporaries(self) -> None:
        """Temporary files a crashed rewrite left (each holds a KEK no data key was wrapped by)."""
        for stale in self.path.parent.glob(f".{self.path.name}.*"):
            pid = stale.name.split(".")[2] if stale.name.count(".") >= 3 else ""
            if pid.isdigit() and not _alive(int(pid)):
                destroy_file(stale)


def read_key_file(path: Path) -> list[bytes]:
    """The KEKs a key file holds, current first ([] when it does not exist). The file of earlier
    versions (one line, the key) reads as a current KEK with no retired one."""
    for _ in range(5):
        try:
            text = path.read_text()
        except FileNotFoundError:
            return []
        if text.strip("\0"):
            break
        # a version just replaced and zeroed (`FileKeks._replace`): the path names the new one
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    try:
        return [decode_kek(line, name=str(path)) for line in lines]
    except ValueError as exc:
        raise KekUnavailable(str(exc)) from None


def _readable(path: Path) -> list[bytes]:
    try:
        return read_key_file(path)
    except KekUnavailable:
        return []


def destroy_file(path: Path) -> None:
    """Overwrite a key file with zeros, then unlink it. (On a journaling or copy-on-write file
    system, or an SSD, the old blocks may survive: that is what a hardware KEK fixes.) A file with
    another name is only unlinked: the other name may be the live key file (a temporary that a
    crash left linked to it) or the operator's backup."""
    try:
        stat = path.lstat()
        if stat.st_nlink == 1 and not path.is_symlink():
            with open(path, "r+b") as handle:
                _overwrite(handle, stat.st_size)
        path.unlink()
    except FileNotFoundError:
        return
    _fsync_directory(path.parent)


def _overwrite(handle: BinaryIO, size: int) -> None:
    """Zeros over an open key file's `size` bytes, on disk before returning."""
    handle.seek(0)
    handle.write(b"\0" * size)
    handle.flush()
    os.fsync(handle.fileno())


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- the start-up check -----------------------------------------------------------------------------
class StoredKeys(Protocol):
    def kek_ids(self) -> set[str]: ...

    def count_wrapped_by(self, kek_id: str) -> int: ...


@dataclass(frozen=True)
class MissingKeks:
    """Stored data keys that no configured KEK opens: which KEK ids they need, how many each."""

    needed: dict[str, int]
    configured: list[ConfiguredKek]
    hints: list[str]

    def message(self) -> str:
        needed = ", ".join(f"{i} ({n} data key{'s' if n != 1 else ''})" for i, n in sorted(self.needed.items()))
        configured = "; ".join(f"{c.id} ({c.role}, from {c.origin})" for c in self.configured) or "none"
        return " ".join(
            [
                f"The key store holds data keys wrapped by key-encryption key(s) that are not configured: {needed}.",
                f"Configured: {configured}.",
                *self.hints,
                "Set MEMORY_KEK (or RETIRED_KEKS, comma-separated) to the key(s) with those ids, or restore the key "
                "file, then start again.",
                "Refusing to start: every memory under those keys would read as missing, and new ones would go under "
                "another key.",
            ]
        )


def missing_keks(source: KekSource, store: StoredKeys) -> MissingKeks | None:
    """None when every stored data key names a configured KEK (or none is stored)."""
    needed = store.kek_ids()
    if not needed:
        return None
    configured = source.configured()
    missing = needed - {c.id for c in configured}
    if not missing:
        return None
    return MissingKeks(
        needed={i: store.count_wrapped_by(i) for i in missing}, configured=configured, hints=source.hints(missing)
    )
