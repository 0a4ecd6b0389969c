"""A real crash in the middle of an erase (SPEC §8.2, docs/lifecycle.md "Erase order").

A separate process erases a memory and is killed with SIGKILL at the worst moment: after its
data keys are destroyed (committed in the key store), before its data transaction commits. The
data rolls back, the key does not. Then, in this process: no readable orphan, no 500, no receipt
that claims anything — and the keyring sweep converges, with a receipt that tells what happened.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memoryapp.keyring import DataKey
from memoryapp.models import MemoryVersion
from retention import keysweep
from retention.models import DeletionReceipt, Operation
from tests.processes import BASE_DIR as ROOT
from tests.processes import test_database_env
from tests.support import make_agent

pytestmark = pytest.mark.django_db(transaction=True)

CHILD = """
import os, signal, sys
import django
django.setup()
from retention import erasure, receipts

def killed(**fields):
    os.kill(os.getpid(), signal.SIGKILL)  # the keys are destroyed; the receipt and the commit never come

receipts.append = killed
erasure.erase_memories(
    [int(sys.argv[1])], operation="forget", workspace_id=int(sys.argv[2]), member_id=int(sys.argv[3]),
    actor_label="killed eraser",
)
"""


def test_an_eraser_killed_between_the_key_deletion_and_the_commit_leaves_nothing_readable(world):
    agent = make_agent(world.editor)
    response = agent.remember(namespace="notes", text="killed in the middle of its erase")
    assert response.status_code == 201
    pk = int(response.json()["memory"]["id"])
    key_id = MemoryVersion.objects.get(pk=pk).key_id

    env = {
        **os.environ,
        **test_database_env(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "MEMORY_EMBEDDER": "hashing",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(pk), str(world.workspace.pk), str(world.editor.pk)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]

    assert MemoryVersion.objects.filter(pk=pk).values_list("pk", flat=True).first() == pk  # the data rolled back
    assert not DataKey.objects.filter(pk=key_id).exists()  # the key did not
    assert not DeletionReceipt.objects.exists()
    listed = agent.list(limit=50)
    assert listed.status_code == 200 and listed.json()["memories"] == []
    assert agent.recall(query="killed erase").json()["memories"] == []

    result = keysweep.sweep_keyring()
    assert (result["versionsErased"], result["receipts"]) == (1, 1)
    receipt = DeletionReceipt.objects.get()
    assert (
        receipt.operation == Operation.KEY_SWEEP
        and receipt.manifest["keysDestroyed"] == 0
        and receipt.verification["clean"]
    )
    assert not MemoryVersion.objects.filter(pk=pk).exists()
