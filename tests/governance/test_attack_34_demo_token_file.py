"""Attack on the kept demo token file (seed_demo, VAR_DIR/demo-agent-token): what the run command
reads there before it starts. The file was read whole with `read_text`, following links: a FIFO
planted at that path (by anyone who can write VAR_DIR) blocked the run command forever before the
server started, and a link to /dev/zero (or a huge file) read until memory ran out. Only a
regular file's first bytes can hold a token; anything else is no kept token, and is replaced."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _seed() -> dict:
    out = io.StringIO()
    call_command("seed_demo", "--json", stdout=out)
    return json.loads(out.getvalue())


def _unblock_later(fifo, blocked: list[bool]) -> threading.Timer:
    """After 10 s, a reader still blocked on the FIFO is released (and noted): a writer can open a
    FIFO without blocking only while a reader has it open."""

    def release():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody is reading it; FileNotFoundError: it was replaced
            return
        blocked.append(True)
        os.write(fd, b"x\n")
        os.close(fd)

    timer = threading.Timer(10, release)
    timer.start()
    return timer


@pytest.mark.parametrize("when", ["first run", "restart"])
def test_a_fifo_at_the_token_path_does_not_block_the_run(settings, tmp_path, when):
    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    kept = tmp_path / "demo-agent-token"
    old = _seed()["agentToken"] if when == "restart" else None
    if kept.exists():
        kept.unlink()
    os.mkfifo(kept, 0o600)
    blocked: list[bool] = []
    timer = _unblock_later(kept, blocked)
    try:
        new = _seed()["agentToken"]
    finally:
        timer.cancel()
    assert not blocked, "the run command waited on the FIFO"
    assert new != old and kept.is_file() and not kept.is_symlink() and kept.read_text().strip() == new
    assert kept.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("target", ["/dev/zero", "huge"])
def test_a_token_path_that_never_ends_is_read_no_further_than_a_token(settings, tmp_path, target):
    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    kept = tmp_path / "demo-agent-token"
    old = _seed()["agentToken"]
    kept.unlink()
    if target == "huge":
        huge = tmp_path / "huge"
        with open(huge, "wb") as handle:
            handle.write(old.encode())
            handle.truncate(1 << 34)  # 16 GiB, sparse: the token, then zeros
        os.symlink(huge, kept)
    else:
        os.symlink(target, kept)
    new = _seed()["agentToken"]
    assert new != old and not kept.is_symlink() and kept.read_text().strip() == new


def test_a_live_token_of_another_workspace_in_the_file_is_not_printed_or_kept(settings, tmp_path):
    """A valid token of someone else (another workspace's credential, even one named like the
    demo's) written at the path is not handed out as the demo agent's, and is left usable."""
    from rest_framework.test import APIClient

    from governance import actions

    settings.MEMORY_EMBEDDER = "hashing"
    settings.VAR_DIR = tmp_path
    _seed()
    workspace, owner = actions.create_workspace(
        "Elsewhere", owner_email="owner@elsewhere.test", password="pw-elsewhere-1"
    )
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=owner.user)
    owner.refresh_from_db()
    _, foreign = actions.create_credential(owner, name="demo agent", scopes=["memory:read"])
    (tmp_path / "demo-agent-token").write_text(foreign + "\n")
    seeded = _seed()
    assert seeded["agentToken"] != foreign and foreign not in json.dumps(seeded)
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Bearer {foreign}")
        .post("/api/agent/v1/memories/list", {}, format="json")
        .status_code
        == 200
    )
