"""The KEK in a PKCS#11 token (issue 33, docs/encryption.md "KEK backends"), against SoftHSM2.

Tried as an operator and an attacker would: memories go in and out with the KEK in the token; a
rotation generates the new KEK there, re-wraps, and destroys the retired object, after which a
copy of a wrapped key taken before (a key-store backup, a dead tuple) unwraps nowhere; the KEK
cannot be read out of the token (CKA_VALUE, C_WrapKey); a wrong PIN, a missing module or token,
a KEK object gone — every one refuses at start-up with what is missing named, and nothing is
silently replaced. Both backends (the key file, the token) pass the same backend contract.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import subprocess
import sys
import uuid
from pathlib import Path

import pkcs11  # python-pkcs11, in the test extras: CI never skips these
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from core import backends
from memoryapp import crypto, kek, kek_backends, keyring
from memoryapp.apps import check_key_encryption_keys
from memoryapp.crypto import SealError
from memoryapp.keyring import DataKey
from memoryapp.models import MemoryVersion
from tests.support import make_agent


def source() -> kek_backends.Pkcs11Keks:
    found = keyring.kek_source()
    assert isinstance(found, kek_backends.Pkcs11Keks)
    return found


def restart() -> None:
    backends.forget("KEK_BACKEND")
    keyring.spare_keys().clear()


def remember(agent, text: str) -> int:
    response = agent.remember(namespace="notes", text=text)
    assert response.status_code == 201, response.json()
    return int(response.json()["memory"]["id"])


def listed(agent) -> set[int]:
    response = agent.list(limit=100)
    assert response.status_code == 200
    return {int(m["id"]) for m in response.json()["memories"]}


def recalled(agent, query: str) -> set[int]:
    response = agent.recall(query=query, limit=20)
    assert response.status_code == 200, response.json()
    return {int(m["id"]) for m in response.json()["memories"]}


def rotate() -> dict:
    out = io.StringIO()
    call_command("rotate_kek", "--json", "--settle", "0", "--chunk", "2", stdout=out)
    return json.loads(out.getvalue())


def session(hsm):
    """The test's own view of the token: the backend's logged-in session (PKCS#11 logs in once per
    process and token; a second log-in would be refused as already logged in)."""
    token = kek_backends._token(hsm.module, hsm.label)
    with token.lock:
        return token.open(hsm.pin)


def kek_objects(hsm, prefix: str) -> dict[str, object]:
    found = {}
    for obj in session(hsm).get_objects({pkcs11.Attribute.CLASS: pkcs11.ObjectClass.SECRET_KEY}):
        parsed = kek_backends._parse_label(obj.label or "", prefix)
        if parsed:
            found[parsed[1]] = obj
    return found


# --- end to end -----------------------------------------------------------------------------------------
def test_remember_recall_forget_with_the_kek_in_the_token(world, token_kek, settings):
    agent = make_agent(world.editor)
    ids = {remember(agent, f"hsmfeather note {i} about parcels") for i in range(3)}
    current = source().current_id()
    assert set(kek_objects(token_kek, settings.PKCS11_KEY_LABEL)) == {current}  # generated in the token on first use
    assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {current}
    assert listed(agent) == ids and recalled(agent, "hsmfeather parcels") == ids
    assert not settings.MEMORY_KEK_FILE.exists()  # no KEK on disk
    gone = min(ids)
    key_id = MemoryVersion.objects.get(pk=gone).key_id
    assert agent.forget(memoryId=str(gone)).status_code == 200
    assert not DataKey.objects.filter(pk=key_id).exists()
    assert listed(agent) == ids - {gone} and recalled(agent, "hsmfeather parcels") == ids - {gone}
    restart()  # a new process: finds the same KEK object, generates none
    assert listed(agent) == ids - {gone} and set(kek_objects(token_kek, settings.PKCS11_KEY_LABEL)) == {current}


# --- rotation and destruction -----------------------------------------------------------------------------
def test_rotation_rewraps_in_the_token_and_a_copy_taken_before_unwraps_nowhere(world, token_kek, settings):
    agent = make_agent(world.editor)
    ids = {remember(agent, f"rotated in the token {i}") for i in range(5)}
    old = source().current_id()
    backup = list(DataKey.objects.values_list("key_id", "wrapped_by", "wrapped"))  # a key-store backup
    keys = source().keys()
    assert all(keys.unwrap(key_id, by, bytes(w)) for key_id, by, w in backup)  # opens before the rotation
    result = rotate()
    new = source().current_id()
    assert (
        result["began"]
        and result["destroyedKeks"] == [old]
        and result["notRewrapped"] == 0
        and result["currentKek"] == new != old
    )
    assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {new}
    assert set(kek_objects(token_kek, settings.PKCS11_KEY_LABEL)) == {new}  # the retired object is destroyed
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None
    keys = source().keys()
    for key_id, by, wrapped in backup:
        with pytest.raises(SealError):
            keys.unwrap(key_id, by, bytes(wrapped))
    # ...and not in any other process either: the object is gone from the token itself.
    assert old not in {
        o.label.rsplit(":", 1)[-1]
        for o in session(token_kek).get_objects({pkcs11.Attribute.CLASS: pkcs11.ObjectClass.SECRET_KEY})
    }


def test_a_second_rotation_right_after_the_first_destroys_again(world, token_kek):
    agent = make_agent(world.editor)
    ids = {remember(agent, f"twice {i}") for i in range(3)}
    first, second = rotate(), rotate()
    assert (
        first["destroyedKeks"]
        and second["destroyedKeks"] == [first["currentKek"]]
        and source().ids() == [second["currentKek"]]
    )
    assert listed(agent) == ids


def test_the_current_kek_is_never_destroyed(world, token_kek):
    make_agent(world.editor).remember(namespace="notes", text="one")
    with pytest.raises(kek_backends.CurrentKekNotDestroyed):
        source().destroy(source().current_id())


# --- the KEK never leaves the token ---------------------------------------------------------------------------
def test_the_kek_cannot_be_read_nor_wrapped_out_of_the_token(world, token_kek, settings):
    make_agent(world.editor).remember(namespace="notes", text="kept by the token")
    (obj,) = kek_objects(token_kek, settings.PKCS11_KEY_LABEL).values()
    attribute = pkcs11.Attribute
    with pytest.raises(pkcs11.AttributeSensitive):
        obj[attribute.VALUE]
    assert (
        obj[attribute.SENSITIVE]
        and obj[attribute.ALWAYS_SENSITIVE]
        and obj[attribute.NEVER_EXTRACTABLE]
        and obj[attribute.TOKEN]
    )
    assert not obj[attribute.EXTRACTABLE] and not obj[attribute.WRAP] and not obj[attribute.UNWRAP]
    wrapping = session(token_kek).generate_key(pkcs11.KeyType.AES, 256, store=False, template={attribute.WRAP: True})
    with pytest.raises((pkcs11.KeyUnextractable, pkcs11.KeyNotWrappable)):
        wrapping.wrap_key(obj, mechanism=pkcs11.Mechanism.AES_KEY_WRAP_PAD)
    with pytest.raises(pkcs11.PKCS11Error):  # the attribute cannot be turned back on
        obj[attribute.EXTRACTABLE] = True


def test_an_extractable_kek_object_put_in_the_token_is_refused(world, token_kek, settings):
    attribute = pkcs11.Attribute
    session(token_kek).generate_key(
        pkcs11.KeyType.AES,
        256,
        label=f"{settings.PKCS11_KEY_LABEL}:00000001:{secrets.token_hex(8)}",
        store=True,
        template={attribute.SENSITIVE: False, attribute.EXTRACTABLE: True},
    )
    restart()
    with pytest.raises(kek.KekUnavailable, match="extractable"):
        keyring.key_encryption_keys()
    with pytest.raises(ImproperlyConfigured, match="extractable"):
        keyring.require_keks()


# --- start-up: what is missing is named, nothing is replaced -----------------------------------------------
def test_the_start_up_check_refuses_when_the_kek_object_is_gone(world, token_kek, settings):
    agent = make_agent(world.editor)
    ids = {remember(agent, f"needs its KEK {i}") for i in range(2)}
    (needed,) = kek_objects(token_kek, settings.PKCS11_KEY_LABEL)
    kek_objects(token_kek, settings.PKCS11_KEY_LABEL)[needed].destroy()  # deleted in the HSM, out of band
    restart()
    # (require_keks() asks the same on a connection of its own, which cannot see this test's rows.)
    missing = keyring.keks_missing()
    assert missing is not None
    message = missing.message()
    assert (
        needed in message
        and token_kek.label in message
        and f"{len(ids)} data keys" in message
        and "Configured: none" in message
    )
    assert [e.id for e in check_key_encryption_keys()] == ["memoryapp.E001"]
    with pytest.raises(kek.KekUnavailable, match="holds no KEK object"):
        keyring.key_encryption_keys().wrap(uuid.uuid4(), os.urandom(32))
    assert kek_objects(token_kek, settings.PKCS11_KEY_LABEL) == {}  # none was generated in its place
    assert listed(agent) == set()  # a request meanwhile: the memories hidden (no 500), none under a new key
    with pytest.raises(kek.KekUnavailable, match="holds no KEK object"):
        rotate()
    assert kek_objects(token_kek, settings.PKCS11_KEY_LABEL) == {}


@pytest.mark.parametrize(
    "what", ["wrong PIN", "missing module", "not a PKCS#11 module", "missing token", "unreadable PIN file"]
)
def test_a_token_that_cannot_be_used_refuses_at_start_up_with_a_clear_error(world, token_kek, settings, tmp_path, what):
    make_agent(world.editor).remember(
        namespace="notes", text="stored under the token"
    )  # logged in with the right PIN first
    if what == "wrong PIN":
        settings.PKCS11_PIN, expected = token_kek.pin + "x", "PKCS11_PIN is wrong"
    elif what == "missing module":
        settings.PKCS11_MODULE, expected = str(tmp_path / "libvendor-pkcs11.so"), "does not exist"
    elif what == "not a PKCS#11 module":
        (tmp_path / "libnot.so").write_bytes(b"\x7fELF not a library")
        settings.PKCS11_MODULE, expected = str(tmp_path / "libnot.so"), "cannot be loaded"
    elif what == "missing token":
        settings.PKCS11_TOKEN_LABEL, expected = (
            "no-such-token",
            f"no token labelled 'no-such-token' (tokens there: '{token_kek.label}')",
        )
    else:
        settings.PKCS11_PIN, settings.PKCS11_PIN_FILE, expected = "", str(tmp_path / "absent-pin"), "PKCS11_PIN_FILE"
    restart()
    with pytest.raises(ImproperlyConfigured) as refused:
        keyring.require_keks()
    assert expected in str(refused.value) and "Refusing to start" in str(refused.value)
    assert token_kek.pin not in str(refused.value)  # never the PIN itself
    errors = check_key_encryption_keys()
    assert [e.id for e in errors] == ["memoryapp.E002"] and expected in errors[0].msg


def test_the_pin_can_come_from_a_file(world, token_kek, settings, tmp_path):
    pin_file = tmp_path / "pin"
    pin_file.write_text(token_kek.pin + "\n")
    settings.PKCS11_PIN, settings.PKCS11_PIN_FILE = "", str(pin_file)
    restart()
    agent = make_agent(world.editor)
    pk = remember(agent, "pin from a file")
    assert keyring.keks_missing() is None and listed(agent) == {pk}


# --- moving from the key file to the token -----------------------------------------------------------------
def test_migrating_from_the_key_file_to_the_token(world, token_kek, settings):
    key_file = settings.MEMORY_KEK_FILE
    settings.KEK_BACKEND = "file"
    restart()
    agent = make_agent(world.editor)
    ids = {remember(agent, f"from the file {i}") for i in range(3)}
    file_key = kek.read_key_file(key_file)[0]
    settings.KEK_BACKEND = "pkcs11"
    restart()
    missing = keyring.keks_missing()  # the file is not used silently...
    assert (
        missing is not None
        and f"The file {key_file} holds KEK {crypto.kek_id(file_key)}" in missing.message()
        and "RETIRED_KEKS" in missing.message()
    )
    with pytest.raises(kek.KekUnavailable, match="holds no KEK object"):
        keyring.key_encryption_keys().wrap(uuid.uuid4(), os.urandom(32))
    assert (
        kek_objects(token_kek, settings.PKCS11_KEY_LABEL) == {}
    )  # ...and no token KEK is made while the stored keys need the file's
    settings.RETIRED_KEKS = [base64.b64encode(file_key).decode()]  # the explicit step
    restart()
    assert listed(agent) == ids
    result = rotate()
    token_id = source().current_id()
    assert result["removeFromRetiredKeks"] == [crypto.kek_id(file_key)] and result["notRewrapped"] == 0
    assert set(DataKey.objects.values_list("wrapped_by", flat=True)) == {token_id} and set(
        kek_objects(token_kek, settings.PKCS11_KEY_LABEL)
    ) == {token_id}
    assert not key_file.exists()  # the KEK on disk is destroyed once nothing needs it
    settings.RETIRED_KEKS = []
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None


# --- the backend contract, both backends -------------------------------------------------------------------
@pytest.fixture(params=["file", "pkcs11"])
def backend(request, settings, tmp_path, softhsm) -> kek_backends.KekBackend:
    if request.param == "file":
        return kek_backends.FileBackend(tmp_path / "memory_kek", may_create=lambda: True)
    config = kek_backends.Pkcs11Config(
        module=softhsm.module, token_label=softhsm.label, pin=softhsm.pin, key_label=f"c{secrets.token_hex(6)}"
    )
    return kek_backends.Pkcs11Keks(config, stored_kek_ids=set)


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dek=st.binary(min_size=32, max_size=32), key_id=st.uuids(), other=st.uuids())
def test_a_wrapped_key_opens_only_under_its_key_id_and_kek(backend, dek, key_id, other):
    by, wrapped = backend.wrap(key_id, dek)
    assert by == backend.current_id() and dek not in wrapped and backend.unwrap(key_id, by, wrapped) == dek
    if other != key_id:
        with pytest.raises(SealError):
            backend.unwrap(other, by, wrapped)  # copied to another key id
    flipped = bytearray(wrapped)
    flipped[-1] ^= 1
    with pytest.raises(SealError):
        backend.unwrap(key_id, by, bytes(flipped))
    with pytest.raises(SealError):
        backend.unwrap(key_id, "0" * 16, wrapped)  # named by a KEK that is not there


def test_generate_keeps_the_old_kek_until_it_is_destroyed(backend):
    key_id, dek = uuid.uuid4(), os.urandom(32)
    old, wrapped = backend.wrap(key_id, dek)
    new = backend.generate()
    assert new != old and backend.current_id() == new and backend.ids() == [new, old]
    assert backend.unwrap(key_id, old, wrapped) == dek  # the retired KEK still unwraps
    new_by, rewrapped = backend.wrap(key_id, dek)
    assert new_by == new and backend.unwrap(key_id, new, rewrapped) == dek
    with pytest.raises(kek_backends.CurrentKekNotDestroyed):
        backend.destroy(new)
    backend.destroy(old)
    assert backend.ids() == [new]
    with pytest.raises(SealError):
        backend.unwrap(key_id, old, wrapped)
    assert backend.unwrap(key_id, new, rewrapped) == dek


def test_a_forked_child_unwraps_with_a_session_of_its_own(token_kek):
    backend = kek_backends.Pkcs11Keks(
        kek_backends.Pkcs11Config(
            module=token_kek.module,
            token_label=token_kek.label,
            pin=token_kek.pin,
            key_label=f"f{secrets.token_hex(6)}",
        ),
        stored_kek_ids=set,
    )
    key_id, dek = uuid.uuid4(), os.urandom(32)
    by, wrapped = backend.wrap(key_id, dek)
    pid = os.fork()
    if pid == 0:  # pragma: no cover -- the child reports by its exit status
        try:
            os._exit(0 if backend.unwrap(key_id, by, wrapped) == dek and backend.wrap(key_id, dek)[0] == by else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert backend.unwrap(key_id, by, wrapped) == dek  # the parent's session still works


# --- settings -------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"KEK_BACKEND": "hsm"}, "KEK_BACKEND must be one of file, pkcs11"),
        (
            {"KEK_BACKEND": "pkcs11", "PKCS11_PIN": "1234"},
            "KEK_BACKEND=pkcs11 needs PKCS11_MODULE and PKCS11_TOKEN_LABEL",
        ),
        (
            {"KEK_BACKEND": "pkcs11", "PKCS11_MODULE": "/x.so", "PKCS11_TOKEN_LABEL": "t"},
            "exactly one of PKCS11_PIN and PKCS11_PIN_FILE",
        ),
        (
            {
                "KEK_BACKEND": "pkcs11",
                "PKCS11_MODULE": "/x.so",
                "PKCS11_TOKEN_LABEL": "t",
                "PKCS11_PIN": "1",
                "MEMORY_KEK": base64.b64encode(bytes(32)).decode(),
            },
            "MEMORY_KEK is set but KEK_BACKEND=pkcs11",
        ),
    ],
)
def test_an_incomplete_pkcs11_configuration_stops_at_settings_load(tmp_path, env, expected):
    root = Path(__file__).resolve().parents[2]
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PKCS11_", "KEK_BACKEND", "MEMORY_KEK", "DATABASE_URL", "REDIS_URL"))
    }
    clean |= {"VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(root), **env}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=root,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and expected in done.stderr


@pytest.mark.slow
def test_processes_refuse_to_start_on_a_wrong_pin_and_start_with_the_right_one(softhsm, tmp_path):
    """A deployment of its own (SQLite under tmp_path) with KEK_BACKEND=pkcs11: `manage.py check`
    and uvicorn refuse a wrong PIN at start-up, naming it (and never printing the PIN)."""
    root = Path(__file__).resolve().parents[2]
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {"DATABASE_URL", "REDIS_URL", "KEYRING_DATABASE_URL", "CELERY_BROKER_URL", "MEMORY_KEK", "RETIRED_KEKS"}
    }
    env |= {
        "VAR_DIR": str(tmp_path),
        "MEMORY_EMBEDDER": "hashing",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONPATH": str(root),
    }
    env |= {
        "KEK_BACKEND": "pkcs11",
        "PKCS11_MODULE": softhsm.module,
        "PKCS11_TOKEN_LABEL": softhsm.label,
        "PKCS11_KEY_LABEL": f"p{secrets.token_hex(6)}",
    }
    wrong = "not-" + softhsm.pin

    def run(*args: str, pin: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            args, cwd=root, env=env | {"PKCS11_PIN": pin}, capture_output=True, text=True, timeout=180
        )

    python = sys.executable
    assert run(python, "manage.py", "migrate", "--noinput", pin=softhsm.pin).returncode == 0
    check = run(python, "manage.py", "check", pin=wrong)
    assert (
        check.returncode == 1
        and "memoryapp.E002" in check.stderr
        and "PKCS11_PIN is wrong" in check.stderr
        and wrong not in check.stderr
    )
    server = run(str(Path(python).parent / "uvicorn"), "config.asgi:application", "--port", "0", pin=wrong)
    assert server.returncode == 3 and "PKCS11_PIN is wrong" in server.stderr and wrong not in server.stderr
    assert run(python, "manage.py", "check", pin=softhsm.pin).returncode == 0
