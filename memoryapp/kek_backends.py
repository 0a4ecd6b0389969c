"""KEK backends: where the key-encryption key lives and where data keys are wrapped
(docs/encryption.md "KEK backends").

`KekBackend` is the interface a KEK store offers: the current KEK's id, `wrap`, `unwrap`, `generate`
(a new current KEK, the old one kept until destroyed), `destroy` and `ids`. Chosen by `KEK_BACKEND`:

- `FileBackend` (`file`, the default): the key file of `memoryapp.kek.FileKeks`; wrapping is
  AES-256-GCM in this process.
- `Pkcs11Keks` (`pkcs11`): non-extractable AES-256 keys generated in a PKCS#11 token; wrap and unwrap
  run inside the token, so the KEK never leaves it. The wrapped layout and associated data are the
  file backend's, so a data key stays bound to its key id.

Both are KEK sources (`memoryapp.kek.KekSource`), so a rotation and the start-up check drive them
alike; in the token a rotation destroys the retired object, after which no copy of a wrapped key
unwraps anywhere. The first KEK is generated only while no stored data key needs another one: a
token without the KEK the stored keys name is never silently given a new one.

Over ~400 lines on purpose: both backends behind one interface, and the token session, its
errors and its start-up checks, which only the PKCS#11 backend has.
"""

from __future__ import annotations

import hmac
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from uuid import UUID

from memoryapp.crypto import FORMAT, NONCE_BYTES, OVERHEAD, KeyEncryptionKeys, SealError, _dek_aad, kek_id
from memoryapp.kek import (
    ConfiguredKek,
    FileKeks,
    KekUnavailable,
    Retirement,
    _readable,
    _retired_from_environment,
    destroy_file,
    new_kek,
    read_key_file,
)

logger = logging.getLogger(__name__)


class KekBackend(Protocol):
    """What every KEK store offers (see the module docstring)."""

    origin: str

    def current_id(self) -> str: ...

    def wrap(self, key_id: UUID, dek: bytes) -> tuple[str, bytes]: ...

    def unwrap(self, key_id: UUID, kek_id: str, wrapped: bytes) -> bytes: ...

    def generate(self) -> str: ...

    def destroy(self, kek_id: str) -> None: ...

    def ids(self) -> list[str]: ...


class CurrentKekNotDestroyed(KekUnavailable):
    """destroy() of the current KEK: every new data key would be wrapped by nothing."""


class _ThroughKeys:
    """current_id/wrap/unwrap of a backend through its key set (`keys()`), for both backends."""

    def current_id(self) -> str:
        current = self.keys().current_id
        if not current:
            raise KekUnavailable(self.no_kek_message())
        return current

    def wrap(self, key_id: UUID, dek: bytes) -> tuple[str, bytes]:
        return self.keys().wrap(key_id, dek)

    def unwrap(self, key_id: UUID, kek_id: str, wrapped: bytes) -> bytes:
        return self.keys().unwrap(key_id, kek_id, wrapped)


# --- the key file ------------------------------------------------------------------------------------
class FileBackend(_ThroughKeys, FileKeks):
    """The embedded default's key file (`memoryapp.kek.FileKeks`, behaviour unchanged) as a backend."""

    def generate(self) -> str:
        held = read_key_file(self.path) if self.path.exists() else []
        if not held:
            self.keys()  # a missing file: made if the store is empty, refused otherwise
            held = read_key_file(self.path)
        new = new_kek()
        self._replace(new, *held)
        return kek_id(new)

    def destroy(self, kek_id_: str) -> None:
        held = read_key_file(self.path)
        if held and kek_id(held[0]) == kek_id_:
            raise CurrentKekNotDestroyed(f"KEK {kek_id_} is the current one in {self.path}: generate a new one first")
        kept = [k for k in held if kek_id(k) != kek_id_]
        if len(kept) != len(held):
            self._replace(*kept)

    def ids(self) -> list[str]:
        return [kek_id(k) for k in read_key_file(self.path)]


# --- PKCS#11 ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pkcs11Config:
    """PKCS11_MODULE, PKCS11_TOKEN_LABEL, PKCS11_PIN or PKCS11_PIN_FILE, PKCS11_KEY_LABEL."""

    module: str
    token_label: str
    pin: str = field(default="", repr=False)
    pin_file: str = ""
    key_label: str = "gam-kek"

    def read_pin(self) -> str:
        if self.pin_file:
            try:
                return Path(self.pin_file).read_text().strip()
            except OSError as exc:
                raise KekUnavailable(f"PKCS11_PIN_FILE {self.pin_file} cannot be read: {exc.strerror}") from None
        if not self.pin:
            raise KekUnavailable("KEK_BACKEND=pkcs11 needs the token's user PIN: set PKCS11_PIN or PKCS11_PIN_FILE")
        return self.pin

    @property
    def where(self) -> str:
        return f"PKCS#11 token {self.token_label!r} ({self.module})"


def _pkcs11() -> Any:
    """python-pkcs11, the optional extra `[hsm]`."""
    try:
        import pkcs11
    except ImportError:
        raise KekUnavailable(
            "KEK_BACKEND=pkcs11 needs python-pkcs11: pip install 'governed-agent-memory[hsm]'"
        ) from None
    return pkcs11


class _Token:
    """One logged-in read-write session to one token, shared by the threads of a process (PKCS#11
    forbids concurrent calls on one session: every call holds `lock`). Logging in is per
    application and token, so there is one per (module, token label) in a process; a forked child
    (gunicorn, Celery's prefork pool) re-initialises the library and logs in again."""

    def __init__(self, module: str, token_label: str):
        self.module = module
        self.token_label = token_label
        self.lock = threading.RLock()
        self.session: Any = None
        self.generation = 0  # bumped whenever the session is replaced: key handles of another are stale
        self._pin = ""
        self._pid = os.getpid()

    def open(self, pin: str) -> Any:
        """The session, logged in with `pin` (call under `lock`)."""
        pkcs11 = _pkcs11()
        forked = self._pid != os.getpid()
        if forked:
            self.session, self._pid = None, os.getpid()
        if self.session is not None and hmac.compare_digest(self._pin.encode(), pin.encode()):
            return self.session
        if self.session is not None:  # another PIN: log out, and the new one is checked by the token
            self.close()
        lib = self._library(pkcs11, reinitialize=forked)
        try:
            token = lib.get_token(token_label=self.token_label)
        except pkcs11.NoSuchToken:
            labels = sorted(t.label for t in lib.get_tokens() if t.label)  # not the free slot's uninitialised token
            raise KekUnavailable(
                f"PKCS11_TOKEN_LABEL: the module {self.module} has no token labelled {self.token_label!r} (tokens "
                f"there: {', '.join(map(repr, labels)) or 'none'})"
            ) from None
        except pkcs11.PKCS11Error as exc:
            raise KekUnavailable(
                f"the PKCS#11 module {self.module} did not list its tokens: {type(exc).__name__}"
            ) from None
        try:
            session = token.open(rw=True, user_pin=pin)
        except (pkcs11.PinIncorrect, pkcs11.PinInvalid, pkcs11.PinLenRange):
            raise KekUnavailable(
                f"PKCS11_PIN is wrong for the token {self.token_label!r} ({self.module}): the token refused the log-in"
            ) from None
        except pkcs11.PinLocked:
            raise KekUnavailable(
                f"the user PIN of the token {self.token_label!r} ({self.module}) is locked: the token's security "
                "officer must unlock it"
            ) from None
        except pkcs11.PKCS11Error as exc:
            raise KekUnavailable(
                f"the token {self.token_label!r} ({self.module}) refused a session: {type(exc).__name__}"
            ) from None
        self.session, self._pin = session, pin
        self.generation += 1
        return session

    def _library(self, pkcs11: Any, *, reinitialize: bool) -> Any:
        if not Path(self.module).is_file():
            raise KekUnavailable(
                f"PKCS11_MODULE {self.module} does not exist: install the HSM's PKCS#11 library (SoftHSM2: "
                "/usr/lib/softhsm/libsofthsm2.so)"
            )
        try:
            lib = pkcs11.lib(self.module)
            if reinitialize:
                lib.reinitialize()  # PKCS#11: a forked child calls C_Initialize again
            return lib
        except pkcs11.PKCS11Error as exc:
            raise KekUnavailable(f"PKCS11_MODULE {self.module} cannot be loaded: {exc}") from None

    def close(self) -> None:
        session, self.session, self._pin = self.session, None, ""
        if session is not None:
            try:
                session.close()
            except Exception as exc:  # noqa: BLE001 -- a session the token already dropped
                logger.warning("PKCS#11 session not closed cleanly: %s", type(exc).__name__)

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's session is not ours (never closed here: that would log
        the parent out)."""
        if self._pid != os.getpid():
            self.lock = threading.RLock()
            self.session = None
            self.generation += 1


_TOKENS: dict[tuple[str, str], _Token] = {}
_TOKENS_LOCK = threading.Lock()


def _token(module: str, token_label: str) -> _Token:
    with _TOKENS_LOCK:
        return _TOKENS.setdefault((module, token_label), _Token(module, token_label))


def _forget_tokens_after_fork() -> None:
    global _TOKENS_LOCK
    _TOKENS_LOCK = threading.Lock()
    for token in _TOKENS.values():
        token.forget_after_fork()


os.register_at_fork(after_in_child=_forget_tokens_after_fork)


@dataclass(frozen=True)
class TokenKek:
    id: str
    generation: int
    label: str
    key: Any  # python-pkcs11's SecretKey: a handle in the token, never the key's value


_ID = re.compile(r"^[0-9a-f]{16}$")


def _parse_label(label: str, prefix: str) -> tuple[int, str] | None:
    parts = label.split(":")
    if len(parts) != 3 or parts[0] != prefix or not parts[1].isdigit() or not _ID.match(parts[2]):
        return None
    return int(parts[1]), parts[2]


class TokenKeys:
    """What `Pkcs11Keks.keys()` gives the key store (the interface of `crypto.KeyEncryptionKeys`):
    the token's KEKs as handles, and the software KEKs of RETIRED_KEKS (a migration's)."""

    def __init__(self, source: Pkcs11Keks, keks: list[TokenKek], generation: int, retired: KeyEncryptionKeys | None):
        self._source = source
        self._keks = {k.id: k for k in keks}
        self._generation = generation
        self._retired = retired
        self.current_id = keks[0].id if keks else ""  # "": the token lost every KEK object (reads only)

    def known(self, wrapped_by: str) -> bool:
        return wrapped_by in self._keks or (self._retired is not None and self._retired.known(wrapped_by))

    def wrap(self, key_id: UUID, dek: bytes) -> tuple[str, bytes]:
        if not self.current_id:
            raise KekUnavailable(self._source.no_kek_message())
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._source._call(
            self._generation, self._keks[self.current_id], "encrypt", dek, nonce, _dek_aad(key_id)
        )
        return self.current_id, FORMAT + nonce + sealed

    def unwrap(self, key_id: UUID, wrapped_by: str, wrapped: bytes) -> bytes:
        kek = self._keks.get(wrapped_by)
        if kek is None:
            if self._retired is not None and self._retired.known(wrapped_by):
                return self._retired.unwrap(key_id, wrapped_by, wrapped)
            raise SealError(
                f"data key {key_id} is wrapped by a key-encryption key that is not in the {self._source.config.where} "
                f"({wrapped_by})"
            )
        if len(wrapped) < OVERHEAD or wrapped[:1] != FORMAT:
            raise SealError("not a wrapped key of format 1")
        return self._source._call(
            self._generation, kek, "decrypt", wrapped[1 + NONCE_BYTES :], wrapped[1 : 1 + NONCE_BYTES], _dek_aad(key_id)
        )


class Pkcs11Keks(_ThroughKeys):
    """The KEKs in a PKCS#11 token: a KEK source (memoryapp.kek.KekSource) and a KekBackend.

    `stored_kek_ids`: the KEK ids the key store's data keys name (to decide whether a first KEK
    may be generated). `retired_env`: RETIRED_KEKS, software KEKs that only unwrap (a migration
    from the key file or MEMORY_KEK). `leftover_file`: the embedded default's key file, never
    used; named when it holds a missing key, and destroyed by a rotation once no key needs it.
    `refresh`: seconds a listing of the token's KEK objects is reused (another process's rotation
    is seen within it; KekRotation's settle time is longer)."""

    makes_keys = True

    def __init__(
        self,
        config: Pkcs11Config,
        *,
        stored_kek_ids: Callable[[], set[str]],
        retired_env: Iterable[str] = (),
        leftover_file: Path | None = None,
        refresh: float = 1.0,
    ):
        self.config = config
        self.origin = config.where
        self._stored_kek_ids = stored_kek_ids
        self._retired_env = _retired_from_environment(retired_env)
        self._retired = KeyEncryptionKeys(self._retired_env[0], self._retired_env[1:]) if self._retired_env else None
        self.leftover_file = leftover_file
        self.refresh = refresh
        self._token = _token(config.module, config.token_label)
        self._listed: tuple[float, int, list[TokenKek]] | None = None

    # --- the token ---------------------------------------------------------------------------------
    def _session(self) -> Any:
        return self._token.open(self.config.read_pin())

    def _list(self, *, fresh: bool = False) -> tuple[int, list[TokenKek]]:
        """The token's KEK objects, current (highest generation) first, and the session generation
        their handles belong to. Refuses an object that could leave the token."""
        with self._token.lock:
            session = self._session()
            generation = self._token.generation
            listed = self._listed
            if (
                not fresh
                and listed is not None
                and listed[1] == generation
                and time.monotonic() - listed[0] < self.refresh
            ):
                return generation, listed[2]
            pkcs11 = _pkcs11()
            found = []
            try:
                for obj in session.get_objects(
                    {
                        pkcs11.Attribute.CLASS: pkcs11.ObjectClass.SECRET_KEY,
                        pkcs11.Attribute.KEY_TYPE: pkcs11.KeyType.AES,
                    }
                ):
                    parsed = _parse_label(obj.label or "", self.config.key_label)
                    if parsed is None:
                        continue
                    if obj[pkcs11.Attribute.EXTRACTABLE] or not obj[pkcs11.Attribute.SENSITIVE]:
                        raise KekUnavailable(
                            f"the KEK object {obj.label!r} in the {self.config.where} is extractable or not "
                            "sensitive: its value could leave the token. Generate KEKs with CKA_SENSITIVE=true and "
                            "CKA_EXTRACTABLE=false (let rotate_kek make one)."
                        )
                    found.append(TokenKek(id=parsed[1], generation=parsed[0], label=obj.label, key=obj))
            except pkcs11.PKCS11Error as exc:
                self._token.close()
                raise KekUnavailable(
                    f"the {self.config.where} did not list its objects: {type(exc).__name__}"
                ) from None
            found.sort(key=lambda k: (k.generation, k.id), reverse=True)
            self._listed = (time.monotonic(), generation, found)
            return generation, found

    def _call(self, generation: int, kek: TokenKek, operation: str, data: bytes, nonce: bytes, aad: bytes) -> bytes:
        pkcs11 = _pkcs11()
        params = pkcs11.GCMParams(nonce, aad, 128)
        with self._token.lock:
            if self._token.generation != generation or self._token.session is None:
                # The session was replaced (another PIN, a fork) since `keys()`: its handles are
                # stale; the same KEK, found again by id, if it still exists.
                _, found = self._list()
                kek = next((k for k in found if k.id == kek.id), None)  # type: ignore[assignment]
                if kek is None:
                    raise SealError("the KEK is no longer in the token")
            try:
                return getattr(kek.key, operation)(data, mechanism=pkcs11.Mechanism.AES_GCM, mechanism_param=params)
            except pkcs11.PKCS11Error as exc:
                self._listed = None  # a destroyed object, a dropped session: list again next time
                if operation == "encrypt":
                    raise KekUnavailable(
                        f"the {self.config.where} did not wrap with KEK {kek.id}: {type(exc).__name__}"
                    ) from None
                raise SealError(
                    f"data key does not unwrap under KEK {kek.id} in the token ({type(exc).__name__}): corrupted, or "
                    "bound to another key id"
                ) from None

    def _may_create(self) -> bool:
        stored = self._stored_kek_ids()
        return stored <= {kek_id(k) for k in self._retired_env}

    # --- KekSource -----------------------------------------------------------------------------------
    def keys(self) -> TokenKeys:
        generation, found = self._list()
        if not found:
            with self._token.lock:
                generation, found = self._list(fresh=True)
                if not found and self._may_create():
                    self.generate()
                    generation, found = self._list(fresh=True)
        if not found:
            # The stored keys need a KEK the token does not hold (deleted in the HSM under a
            # running process; a new process refuses to start): reads hide what they cannot open,
            # as with any key that does not unwrap; a write refuses (wrap). No new KEK is made.
            logger.error("%s", self.no_kek_message())
        return TokenKeys(self, found, generation, self._retired)

    def no_kek_message(self) -> str:
        return (
            f"The {self.config.where} holds no KEK object labelled {self.config.key_label}:… and the key store holds "
            "data keys wrapped by another KEK: restore the KEK object from the HSM's backup (or configure the token "
            "that has it). A new KEK would hide every memory, so none is made."
        )

    def configured(self) -> list[ConfiguredKek]:
        _, found = self._list(fresh=True)
        listed = [ConfiguredKek(k.id, "current" if i == 0 else "retired", self.origin) for i, k in enumerate(found)]
        return listed + [ConfiguredKek(kek_id(k), "retired", "RETIRED_KEKS (environment)") for k in self._retired_env]

    def begin_rotation(self) -> bool:
        _, found = self._list(fresh=True)
        if not found:
            if not self.keys().current_id:  # the first KEK: made if nothing stored needs another
                raise KekUnavailable(self.no_kek_message())
            return False
        if len(found) > 1:
            return False  # a rotation under way: resumed, not stacked
        self.generate()
        return True

    def retire_unneeded(self, needed: set[str]) -> Retirement:
        _, found = self._list(fresh=True)
        destroyed = [k.id for k in found[1:] if k.id not in needed]
        for kek in destroyed:
            self.destroy(kek)
        if self.leftover_file is not None:
            held = _readable(self.leftover_file)
            ids = {kek_id(k) for k in held}
            if held and not ids & needed:
                destroy_file(self.leftover_file)
        return Retirement(
            destroyed=sorted(destroyed),
            destroyed_from=self.origin,
            for_the_operator=sorted(kek_id(k) for k in self._retired_env if kek_id(k) not in needed),
        )

    def hints(self, missing: set[str]) -> list[str]:
        hints = [
            f"The {self.config.where} holds no KEK object with id {i} (label "
            f"{self.config.key_label}:<generation>:{i}): restore it from the HSM's backup, or point "
            "PKCS11_MODULE/PKCS11_TOKEN_LABEL at the token that has it."
            for i in sorted(missing)
        ]
        if self.leftover_file is not None:
            held = {kek_id(k) for k in _readable(self.leftover_file)} & missing
            hints += [
                f"The file {self.leftover_file} holds KEK {i}, which these keys need: put it in RETIRED_KEKS to "
                "migrate its keys into the token (rotate_kek)."
                for i in sorted(held)
            ]
        return hints

    # --- KekBackend ----------------------------------------------------------------------------------
    def generate(self) -> str:
        """A new current KEK, generated in the token: AES-256, a token object, private, sensitive,
        never extractable, usable only to encrypt and decrypt (not to wrap other keys out)."""
        pkcs11 = _pkcs11()
        attribute = pkcs11.Attribute
        with self._token.lock:
            _, found = self._list(fresh=True)
            generation = (found[0].generation + 1) if found else 1
            new_id = secrets.token_hex(8)
            label = f"{self.config.key_label}:{generation:08d}:{new_id}"
            template = {
                attribute.TOKEN: True,
                attribute.PRIVATE: True,
                attribute.SENSITIVE: True,
                attribute.EXTRACTABLE: False,
                attribute.ENCRYPT: True,
                attribute.DECRYPT: True,
                attribute.WRAP: False,
                attribute.UNWRAP: False,
                attribute.SIGN: False,
                attribute.VERIFY: False,
                attribute.DERIVE: False,
            }
            try:
                self._session().generate_key(
                    pkcs11.KeyType.AES, 256, id=bytes.fromhex(new_id), label=label, store=True, template=template
                )
            except pkcs11.PKCS11Error as exc:
                raise KekUnavailable(f"the {self.config.where} did not generate a KEK: {type(exc).__name__}") from None
            self._listed = None
        logger.info("generated KEK %s in the %s", new_id, self.config.where)
        return new_id

    def destroy(self, kek_id_: str) -> None:
        """C_DestroyObject of that KEK: every data key it wrapped, wherever a copy survives, no
        longer unwraps. Never the current one."""
        pkcs11 = _pkcs11()
        with self._token.lock:
            _, found = self._list(fresh=True)
            if found and found[0].id == kek_id_:
                raise CurrentKekNotDestroyed(
                    f"KEK {kek_id_} is the current one in the {self.config.where}: generate a new one first"
                )
            for kek in found:
                if kek.id == kek_id_:
                    try:
                        kek.key.destroy()
                    except pkcs11.PKCS11Error as exc:
                        raise KekUnavailable(
                            f"the {self.config.where} did not destroy KEK {kek_id_}: {type(exc).__name__}"
                        ) from None
            self._listed = None
        logger.info("destroyed KEK %s in the %s", kek_id_, self.config.where)

    def ids(self) -> list[str]:
        return [k.id for k in self._list(fresh=True)[1]]
