"""Helpers of the KEK tests (no tests here; `key_file` is a fixture in conftest.py): a process
restart as the key cache sees it, memories to keep under a KEK, the KEK ids in the file and in the
key store, and a crash injected at a named call."""

from __future__ import annotations

from pathlib import Path

from core import backends
from memoryapp import crypto, kek
from memoryapp.keyring import DataKey
from tests.support import make_agent


def restart() -> None:
    """What a new process sees: nothing read from a key file yet."""
    backends.forget("KEK_BACKEND")


def remember_some(world, n: int = 3) -> tuple[object, set[int]]:
    agent = make_agent(world.editor)
    ids = set()
    for i in range(n):
        response = agent.remember(namespace="notes", text=f"kept under a KEK {i}")
        assert response.status_code == 201, response.json()
        ids.add(int(response.json()["memory"]["id"]))
    return agent, ids


def listed(agent) -> set[int]:
    response = agent.list(limit=100)
    assert response.status_code == 200
    return {int(m["id"]) for m in response.json()["memories"]}


def file_ids(path: Path) -> list[str]:
    return [crypto.kek_id(k) for k in kek.read_key_file(path)]


def stored_ids() -> set[str]:
    return set(DataKey.objects.values_list("wrapped_by", flat=True))


class Crash(Exception):
    """The crash `crash_on_call` injects at the named call."""


def crash_on_call(monkeypatch, target, name: str, call: int) -> None:
    original = getattr(target, name)
    calls = {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            raise Crash(f"{name} call {call}")
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, failing)
