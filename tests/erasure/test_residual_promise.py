"""A receipt's residualUntil is a promise: "from residualUntil on, no copy of these memories can be
read, whoever holds every disk and backup". It holds only if the KEK that wrapped the erased keys is
gone by then. Two ways main lets that instant pass with the KEK alive and says nothing (found while
verifying issue 33 as an attacker):

1. the disk proof (`verify_forgetting --backup --receipt`) calls such a receipt CLEAN (state
   "none") whenever the key table's heap file happens to hold no copy — on PostgreSQL the
   post-erase VACUUM clears the heap at once, on SQLite secure_delete does — although the copies
   it cannot see (pg_wal segments, a replica, every pre-erase key-store backup) still unwrap with
   that KEK: the promise is broken, and the check is the one place that can say so;
2. the scheduled rotation reads only today's KEK_ROTATION_HOURS: raise it after receipts were
   written (24 → 72) and the job answers "not_due" past the instant those receipts promised.
"""

from __future__ import annotations

import secrets
import string
from datetime import timedelta

import pytest
from django.utils import timezone

from memoryapp import encryption, keyring
from memoryapp.keyring import KekRecord
from retention import key_residue
from retention.models import DeletionReceipt
from tests.support import make_agent

pytestmark = pytest.mark.django_db(transaction=True)


def _forget_one(world) -> DeletionReceipt:
    agent = make_agent(world.editor)
    text = f"the locker code is {''.join(secrets.choice(string.ascii_lowercase) for _ in range(12))}"
    answer = agent.remember(namespace="vault", text=text)
    assert answer.status_code == 201, answer.json()
    forgotten = agent.forget(memoryId=answer.json()["memory"]["id"])
    assert forgotten.status_code == 200
    return DeletionReceipt.objects.get(pk=forgotten.json()["receiptId"])


def test_a_receipt_past_residual_until_whose_kek_still_exists_is_not_clean(world, key_file, settings):
    """The product's own configuration (KEYRING_VACUUM_AFTER_ERASE on): the heap holds no copy,
    yet the KEK that wrapped the erased key is alive an hour after residualUntil."""
    receipt = _forget_one(world)
    kek = keyring.key_encryption_keys().current_id
    assert receipt.residual["kek"]["kekIds"] == [kek] and receipt.residual_until is not None
    late = receipt.residual_until + timedelta(hours=1)
    assert KekRecord.objects.destroyed_at([kek]) in ({kek: None}, {})  # nothing rotated: the KEK exists
    report = key_residue.inspect_receipt(receipt, now=late)
    assert report["problem"] is not None and report["state"] == "overdue", report
    # the same where the key store's files cannot be read (a remote server): the promise is broken
    # whatever a search could see
    remote = key_residue.KeyStoreFiles([], "postgresql", "the key store's server is not on this machine")
    unread = key_residue.inspect_receipt(receipt, files=remote, now=late)
    assert unread["state"] == "overdue" and unread["problem"] and unread["found"] is None, unread
    assert key_residue.inspect_receipt(receipt, files=remote)["state"] == "not_inspectable"  # inside the window


def test_raising_the_rotation_period_does_not_move_a_rotation_past_what_receipts_promised(world, key_file, settings):
    settings.KEK_ROTATION_HOURS = 24
    receipt = _forget_one(world)
    kek = keyring.key_encryption_keys().current_id
    promised = receipt.residual_until
    assert promised is not None and promised <= timezone.now() + timedelta(hours=25, minutes=1)
    settings.KEK_ROTATION_HOURS = 72  # the operator lengthens the period afterwards
    # an hour before the promised instant (the whole allowance left for the check and the rotation)
    result = encryption.scheduled_rotation(now=promised - encryption.ROTATION_ALLOWANCE, settle=0)
    assert result["rotation"] == "rotated" and kek in result["destroyedKeks"], result
