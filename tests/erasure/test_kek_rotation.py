"""The scheduled KEK rotation (issue 33 Build 1): the beat job `kek_rotation` makes a new KEK once
the current one is KEK_ROTATION_HOURS old, re-wraps every data key and destroys the old one; one
run at a time across workers (the lease); a crash at any step loses nothing; each KEK's creation
and destruction are recorded, which is what receipts' `residualUntil` is computed from and
checked against."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryapp import encryption, kek, keyring
from memoryapp.keyring import KekRecord, KekRotationLease
from retention.jobs import JOBS
from tests.erasure.support import Crash, crash_on_call, file_ids, listed, remember_some, restart, stored_ids

LATER = timedelta(hours=25)


def run(**kwargs) -> dict:
    return encryption.scheduled_rotation(settle=0, chunk=2, **kwargs)


def test_the_job_is_registered_and_runs_on_a_schedule(settings):
    assert JOBS["kek_rotation"] is encryption.scheduled_rotation
    entry = settings.CELERY_BEAT_SCHEDULE["kek-rotation"]
    assert (
        entry["task"] == "retention.tasks.kek_rotation"
        and entry["options"]["expires"] < entry["schedule"].total_seconds()
    )
    assert settings.KEK_ROTATION_HOURS == 24


def test_nothing_happens_before_the_kek_is_due_then_it_rotates_and_records_both_instants(world, key_file):
    agent, ids = remember_some(world, 5)
    old = file_ids(key_file)[0]
    assert run()["rotation"] == "not_due"
    assert file_ids(key_file) == [old]
    made = KekRecord.objects.get(kek_id=old).created_at
    result = run(now=timezone.now() + LATER)
    new = file_ids(key_file)
    assert result["rotation"] == "rotated" and result["destroyedKeks"] == [old] and result["notRewrapped"] == 0
    assert len(new) == 1 and new[0] != old and stored_ids() == set(new)
    old_record, new_record = KekRecord.objects.get(kek_id=old), KekRecord.objects.get(kek_id=new[0])
    assert old_record.created_at == made and old_record.destroyed_at is not None
    assert new_record.created_at >= made and new_record.destroyed_at is None
    assert encryption.kek_schedule().due_at == new_record.created_at + timedelta(hours=24)
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None
    assert run()["rotation"] == "not_due"  # the new KEK is young


@pytest.mark.parametrize("hours,memory_kek,state", [(0, False, encryption.OFF), (24, True, encryption.OPERATOR)])
def test_off_or_operator_keys_are_never_rotated_by_the_job(world, key_file, settings, hours, memory_kek, state):
    settings.KEK_ROTATION_HOURS = hours
    if memory_kek:
        settings.MEMORY_KEK = "A" * 43 + "="
        restart()
    remember_some(world, 1)
    before = set(DataKeyIds())
    result = run(now=timezone.now() + LATER * 10)
    assert result["state"] == state and result["rotation"] == "not_scheduled"
    assert set(DataKeyIds()) == before
    assert encryption.kek_schedule().destroyed_by(timezone.now()) is None


def DataKeyIds() -> list[str]:
    return list(keyring.DataKey.objects.values_list("wrapped_by", flat=True))


def test_a_second_worker_does_not_rotate_while_the_first_holds_the_lease(world, key_file):
    remember_some(world, 3)
    old = file_ids(key_file)
    assert KekRotationLease.objects.claim(encryption.ROTATION_LEASE, "another worker", ttl=encryption.LEASE_TTL)
    assert run(now=timezone.now() + LATER)["rotation"] == "busy"
    assert file_ids(key_file) == old
    # the other worker crashed: its lease lapses and the next run rotates
    KekRotationLease.objects.filter(name=encryption.ROTATION_LEASE).update(until=timezone.now() - timedelta(seconds=1))
    assert run(now=timezone.now() + LATER)["rotation"] == "rotated"
    assert KekRotationLease.objects.get(name=encryption.ROTATION_LEASE).holder == ""  # released


def test_a_run_that_loses_its_lease_stops_before_destroying_anything(world, key_file, monkeypatch):
    remember_some(world, 5)
    old = file_ids(key_file)[0]
    claims = {"n": 0}
    original = keyring.LeaseQuerySet.claim

    def stolen_after_first(self, name, holder, **kwargs):
        claims["n"] += 1
        if claims["n"] > 1:  # while re-wrapping, another worker took the lapsed lease
            return False
        return original(self, name, holder, **kwargs)

    monkeypatch.setattr(keyring.LeaseQuerySet, "claim", stolen_after_first)
    assert run(now=timezone.now() + LATER)["rotation"] == "lease_lost"
    assert old in file_ids(key_file) and KekRecord.objects.get(kek_id=old).destroyed_at is None


@pytest.mark.parametrize(
    "where",
    [
        "writing the new key file",
        "re-wrapping, after the first chunk",
        "recording the new KEK",
        "destroying the retired key",
        "recording the destruction",
    ],
)
def test_a_crash_at_any_step_loses_nothing_and_the_next_run_finishes(world, key_file, monkeypatch, where):
    agent, ids = remember_some(world, 5)
    old = file_ids(key_file)[0]
    with monkeypatch.context() as patch:
        if where == "writing the new key file":
            crash_on_call(patch, kek.os, "replace", 1)
        elif where.startswith("re-wrapping"):
            crash_on_call(patch, keyring.DatabaseKeyStore, "rewrap", 2)
        elif where == "recording the new KEK":
            crash_on_call(patch, keyring.KekRecordQuerySet, "observe", 3)  # the schedule's, begin()'s old, then the new
        elif where == "destroying the retired key":
            crash_on_call(patch, kek.os, "replace", 2)
        else:
            crash_on_call(patch, keyring.KekRecordQuerySet, "mark_destroyed", 1)
        with pytest.raises(Crash):
            run(now=timezone.now() + LATER)
    held = file_ids(key_file)
    if where != "recording the destruction":
        assert old in held  # never destroyed before every key is re-wrapped and committed
    assert KekRotationLease.objects.get(name=encryption.ROTATION_LEASE).holder == ""  # released on the way out
    restart()
    assert listed(agent) == ids and keyring.keks_missing() is None
    if len(held) > 1:  # a rotation was under way: finished by the next run, due or not, with no second new KEK
        result = run()
        assert result["rotation"] == "resumed" and file_ids(key_file) == held[:1]
    elif where == "recording the destruction":
        result = run()
    else:  # the crash came before the new KEK was written: nothing changed, the next due run rotates
        result = run(now=timezone.now() + LATER)
        assert result["rotation"] == "rotated"
    final = file_ids(key_file)
    assert len(final) == 1 and stored_ids() == set(final)
    if where != "recording the destruction":
        assert final[0] != old
    else:
        assert result["recordedDestroyed"] == [old]  # the next run notices the KEK is gone
    assert KekRecord.objects.get(kek_id=old).destroyed_at is not None
    restart()
    assert listed(agent) == ids
