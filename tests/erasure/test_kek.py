"""Keys that cannot be lost silently (issue 32 row 4, docs/encryption.md "The KEK").

A deleted key file, or an unset MEMORY_KEK whose key the stored data keys need, used to be
replaced by a new KEK: every memory read as missing with 200 answers and new ones were sealed
under the new key. Now no process starts then (the check names the KEK ids the keys need and
where the configured ones come from), the key file is created only while the key store is
empty, and `rotate_kek` destroys the retired KEK once every data key is re-wrapped — also after
a crash at any point of it.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from memoryapp import crypto, kek, keyring
from memoryapp.apps import check_key_encryption_keys
from memoryapp.keyring import DataKey
from tests.erasure.support import Crash, crash_on_call, file_ids, listed, remember_some, restart, stored_ids

ROOT = Path(__file__).resolve().parents[2]


def rotate(*args: str) -> dict:
    out = io.StringIO()
    call_command("rotate_kek", "--json", "--settle", "0", "--chunk", "2", *args, stdout=out)
    return json.loads(out.getvalue())


# --- the key file is made once, while nothing needs another -----------------------------------------
def test_a_fresh_key_store_gets_a_new_key_file_on_first_use(world, key_file):
    assert not key_file.exists()
    assert keyring.keks_missing() is None  # nothing stored: nothing missing, and nothing written
    assert not key_file.exists()
    agent, ids = remember_some(world, 1)
    assert key_file.exists() and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert stored_ids() == set(file_ids(key_file)) and listed(agent) == ids


def test_a_deleted_key_file_is_never_replaced_and_the_check_names_what_is_missing(world, key_file):
    agent, ids = remember_some(world)
    needed = file_ids(key_file)[0]
    key_file.unlink()
    restart()
    with pytest.raises(kek.KekUnavailable, match="missing"):
        keyring.key_encryption_keys()
    assert not key_file.exists()  # no new KEK was made
    missing = keyring.keks_missing()
    assert missing is not None and set(missing.needed) == {needed} and missing.needed[needed] == DataKey.objects.count()
    message = missing.message()
    assert needed in message and str(key_file) in message and "Configured: none" in message
    errors = check_key_encryption_keys()
    assert [e.id for e in errors] == ["memoryapp.E001"] and needed in errors[0].msg
    # require_keks() (servers, Celery) asks the same on a connection of its own: the last test.


def test_the_check_passes_with_the_right_key_and_names_a_wrong_one(world, key_file, settings):
    agent, ids = remember_some(world)
    good = base64.b64encode(kek.read_key_file(key_file)[0]).decode()
    assert keyring.keks_missing() is None and check_key_encryption_keys() == []
    settings.MEMORY_KEK = base64.b64encode(secrets.token_bytes(32)).decode()  # a wrong key in the environment
    missing = keyring.keks_missing()
    assert missing is not None and "MEMORY_KEK (environment)" in missing.message()
    assert f"{key_file} holds KEK {file_ids(key_file)[0]}" in missing.message()  # the hint: the file has it
    settings.RETIRED_KEKS = [good]  # the explicit fallback
    assert keyring.keks_missing() is None and listed(agent) == ids


# --- rotation -----------------------------------------------------------------------------------------
def test_rotation_with_the_key_file_destroys_the_retired_key(world, key_file):
    agent, ids = remember_some(world, 5)
    old = file_ids(key_file)
    result = rotate()
    new = file_ids(key_file)
    assert result["began"] and result["destroyedKeks"] == old and result["notRewrapped"] == 0
    assert len(new) == 1 and new != old and stored_ids() == set(new)
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None


def test_unset_environment_with_only_the_retired_key_in_the_file_refuses(world, key_file, settings):
    """The operator's rotation with MEMORY_KEK: the file's key is retired, then MEMORY_KEK unset."""
    agent, ids = remember_some(world)
    file_key = base64.b64encode(kek.read_key_file(key_file)[0]).decode()
    settings.MEMORY_KEK, settings.RETIRED_KEKS = base64.b64encode(secrets.token_bytes(32)).decode(), [file_key]
    result = rotate()
    assert result["removeFromRetiredKeks"] == [crypto.kek_id(crypto.decode_kek(file_key))]
    assert not key_file.exists()  # the retired key left in the key file is destroyed
    assert listed(agent) == ids
    current = crypto.kek_id(crypto.decode_kek(settings.MEMORY_KEK))
    key_file.write_text(file_key + "\n")  # ...and were it still there (a restored file), unsetting MEMORY_KEK
    settings.MEMORY_KEK, settings.RETIRED_KEKS = "", []
    missing = keyring.keks_missing()
    assert missing is not None and set(missing.needed) == {current}
    assert f"{file_ids(key_file)[0]} (current, from the file {key_file})" in missing.message()


@pytest.mark.parametrize(
    "where",
    [
        "writing the new key file",  # os.replace of begin_rotation
        "re-wrapping, after the first chunk",  # DatabaseKeyStore.rewrap
        "removing the retired key",  # os.replace of retire_unneeded
    ],
)
def test_rotation_resumes_after_a_crash_at_any_point(world, key_file, monkeypatch, where):
    agent, ids = remember_some(world, 5)
    old = file_ids(key_file)
    with monkeypatch.context() as patch:
        if where == "writing the new key file":
            crash_on_call(patch, kek.os, "replace", 1)
        elif where.startswith("re-wrapping"):
            crash_on_call(patch, keyring.DatabaseKeyStore, "rewrap", 2)
        else:
            crash_on_call(patch, kek.os, "replace", 2)
        with pytest.raises(Crash):
            rotate()
    held = file_ids(key_file)
    assert old[0] in held  # the old KEK is never gone before every key is re-wrapped
    assert not [p for p in key_file.parent.iterdir() if p.name.startswith(".memory_kek.")]  # no stray copy of a KEK
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None  # readable, and a new process starts
    new_in_progress = held[0] if len(held) > 1 else None
    result = rotate()
    final = file_ids(key_file)
    assert len(final) == 1 and final != old and stored_ids() == set(final)
    if new_in_progress:  # resumed, not a second new KEK
        assert not result["began"] and final == [new_in_progress]
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None


def test_a_running_process_follows_a_rotation_of_the_key_file(world, key_file):
    agent, ids = remember_some(world)
    before = keyring.key_encryption_keys().current_id
    kek.FileKeks(key_file, may_create=lambda: False).begin_rotation()  # another process begins a rotation
    assert keyring.key_encryption_keys().current_id != before  # noticed without a restart
    keyring.spare_keys().clear()  # (spares stored before the rewrite are under the old KEK: the rotation re-wraps them)
    agent2, more = remember_some(world, 1)
    assert DataKey.objects.filter(wrapped_by=keyring.key_encryption_keys().current_id).exists()
    assert listed(agent) | listed(agent2) >= ids | more


# --- a real process -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_processes_refuse_to_start_when_the_key_file_is_gone(tmp_path):
    """A deployment of its own (SQLite under tmp_path): data keys stored, the key file deleted;
    `manage.py check` and the Celery worker and uvicorn refuse, naming the missing KEK id; with the
    file restored they start."""
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
        "PYTHONPATH": str(ROOT),
    }

    def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)

    python = sys.executable
    assert run(python, "manage.py", "migrate", "--noinput").returncode == 0
    stored = run(
        python,
        "manage.py",
        "shell",
        "-c",
        "from memoryapp.keyring import new_row_key, key_store; new_row_key('memoryapp.memoryversion'); "
        "print(*key_store().kek_ids())",
    )
    assert stored.returncode == 0, stored.stderr
    needed = stored.stdout.split()[-1]
    key_file = tmp_path / "memory_kek"
    saved = key_file.read_bytes()
    key_file.unlink()

    check = run(python, "manage.py", "check")
    assert (
        check.returncode == 1
        and "memoryapp.E001" in check.stderr
        and needed in check.stderr
        and str(key_file) in check.stderr
    )
    worker = run(str(Path(python).parent / "celery"), "-A", "config", "worker", "--pool=solo", timeout=120)
    assert worker.returncode == 1 and needed in worker.stderr and "ready" not in worker.stderr
    server = run(str(Path(python).parent / "uvicorn"), "config.asgi:application", "--port", "0", timeout=120)
    assert server.returncode == 3 and needed in server.stderr
    assert not key_file.exists()  # none of them made a new KEK

    key_file.write_bytes(saved)
    assert run(python, "manage.py", "check").returncode == 0
