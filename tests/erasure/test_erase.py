"""Erasure with receipts (SPEC §8): `erase_memories` deletes every artifact and its receipt says so; chunked erasure
takes every row once; a receipt states what may still hold the erased bytes."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from governance import actions as gov_actions
from governance.models import AuditEvent
from memoryapp.access_log import ENTRY_ARTIFACT
from memoryapp.models import MemoryVersion
from retention import erasure
from retention.models import DeletionReceipt, Operation
from tests.support import client_for, make_agent

pytestmark = pytest.mark.django_db


def _memories(world, count: int, *, cite: bool = True) -> list[int]:
    agent = make_agent(world.editor)
    collection = gov_actions.create_collection(world.workspace, name="Cited")
    passage = str(
        gov_actions.create_document(collection, title="d", text="Cited text.").current_version.passages.first().pk
    )
    ids = []
    for i in range(count):
        body = {"citations": [passage]} if cite else {}
        ids.append(agent.remember(namespace="n", text=f"memory {i}", **body).json()["memory"]["id"])
    return [int(i) for i in ids]


def test_an_erase_deletes_every_artifact_and_its_receipt_says_so(world, settings):
    settings.BACKUP_RETENTION_DAYS = 7
    ids = _memories(world, 3)
    before = erasure.verify(ids)
    assert (
        before["clean"] is False and before["remaining"]["memory_version"] == 3 and before["remaining"]["citation"] == 3
    )
    receipt = erasure.erase_memories(
        ids + ids[:1],
        operation=Operation.FORGET,
        workspace_id=world.workspace.pk,
        actor_label="agent",
        member_id=world.editor.pk,
    )
    artifacts = receipt.manifest["artifacts"]
    assert (artifacts["memory_version"], artifacts["citation"], artifacts["memory_embedding"]) == (3, 3, 3)
    assert receipt.manifest["requestedIds"] == 3 and sorted(receipt.memory_version_ids) == sorted(ids)
    assert receipt.versions_erased == 3 and receipt.operation == Operation.FORGET
    assert (
        receipt.workspace_ref == world.workspace.pk
        and receipt.member_ref == world.editor.pk
        and receipt.actor_label == "agent"
    )
    assert receipt.verification["clean"] is True and not any(receipt.verification["remaining"].values())
    assert receipt.unreachable_at == receipt.purged_at and receipt.requested_at <= receipt.purged_at
    wrapped = receipt.residual["kek"]["wrappedKeys"]  # a fingerprint of each destroyed wrapped key (issue 33)
    assert len(wrapped) == 3 and all(len(w["prefix"]) == 26 and len(w["sha256"]) == 64 for w in wrapped)
    assert receipt.residual == erasure.residual_window(receipt.purged_at, wrapped_keys=wrapped)
    assert receipt.residual_until is not None and receipt.residual["kek"]["until"].startswith(
        receipt.residual_until.strftime("%Y-%m-%dT%H:%M:%S")
    )
    assert receipt.residual["backups"]["until"] == (receipt.purged_at + timedelta(days=7)).isoformat()
    assert receipt.verification["remaining"][ENTRY_ARTIFACT] == 0 and "checkedAt" in receipt.verification
    assert receipt.actor is None and receipt.actor_label == "agent"  # no user acted
    assert not MemoryVersion.objects.filter(pk__in=ids).exists()
    assert (
        erasure.erase_memories(ids, operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent")
        is None
    )  # nothing left: no receipt


def test_a_dedupe_key_gives_one_receipt_for_one_piece_of_work(world):
    first, second = _memories(world, 2, cite=False)
    earlier = _memories(world, 1, cite=False)
    assert (
        erasure.erase_memories(
            earlier, operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent"
        )
        is not None
    )  # no key
    kwargs = {
        "operation": Operation.EXPIRY,
        "workspace_id": world.workspace.pk,
        "actor_label": "sweep",
        "dedupe_key": "expiry:x",
    }
    assert erasure.erase_memories([first], **kwargs) is not None
    assert erasure.erase_memories([second], **kwargs) is None
    assert MemoryVersion.objects.filter(pk=second).exists()
    assert DeletionReceipt.objects.filter(dedupe_key="expiry:x").count() == 1


def test_the_receipt_keeps_the_earliest_moment_the_memories_became_unreachable(world):
    ids = _memories(world, 2, cite=False)
    stated = timezone.now() - timedelta(days=3)
    earlier = stated - timedelta(days=1)
    MemoryVersion.objects.filter(pk=ids[0]).update(unreachable_at=earlier)
    receipt = erasure.erase_memories(
        ids,
        operation=Operation.CASCADE_DOCUMENT,
        workspace_id=world.workspace.pk,
        actor_label="x",
        unreachable_at=stated,
    )
    assert receipt.unreachable_at == earlier
    later = _memories(world, 1, cite=False)
    MemoryVersion.objects.filter(pk=later[0]).update(unreachable_at=stated + timedelta(days=1))
    receipt = erasure.erase_memories(
        later,
        operation=Operation.CASCADE_DOCUMENT,
        workspace_id=world.workspace.pk,
        actor_label="x",
        unreachable_at=stated,
    )
    assert receipt.unreachable_at == stated  # a later mark does not move it


def test_chunked_erasure_takes_every_row_once_one_receipt_per_chunk(world):
    ids = _memories(world, 5, cite=False)
    tally = erasure.erase_in_chunks(
        MemoryVersion.objects.filter(pk__in=ids),
        operation=Operation.MEMBER_DELETE,
        workspace_id=world.workspace.pk,
        member_id=world.editor.pk,
        actor_label="member",
        filters={"all": True},
        chunk=2,
    )
    assert (tally.versions, tally.receipts, tally.chunks) == (5, 3, 3)
    receipts = DeletionReceipt.objects.filter(operation=Operation.MEMBER_DELETE)
    assert sorted(len(r.memory_version_ids) for r in receipts) == [1, 2, 2]
    assert all(r.manifest["filters"] == {"all": True} for r in receipts)
    assert len({r.requested_at for r in receipts}) == 1  # one request, several chunks
    assert not MemoryVersion.objects.filter(pk__in=ids).exists()


def test_chunked_expiry_states_the_computed_expiry_as_unreachable(world):
    ids = _memories(world, 2, cite=False)
    anchors = sorted(MemoryVersion.objects.filter(pk__in=ids).values_list("retention_anchor", flat=True))
    erasure.erase_in_chunks(
        MemoryVersion.objects.filter(pk__in=ids),
        operation=Operation.EXPIRY,
        workspace_id=world.workspace.pk,
        member_id=None,
        actor_label="sweep",
        filters={},
        expired_after_days=30,
    )
    receipt = DeletionReceipt.objects.get(operation=Operation.EXPIRY)
    assert receipt.unreachable_at == anchors[0] + timedelta(days=30)


def test_an_admin_erase_of_a_member_erases_all_and_audits_the_count(world):
    from governance.audit import actor_label
    from governance.models import AuditEvent
    from retention.previews import erase_member_memories

    ids = _memories(world, 2)
    assert erase_member_memories(world.editor, actor=world.owner.user, reason="request") == 2
    assert not MemoryVersion.objects.filter(pk__in=ids).exists()
    receipt = DeletionReceipt.objects.get(operation=Operation.ADMIN_ERASE)
    assert receipt.manifest["filters"] == {"member": world.editor.pk, "reason": "request"}
    assert receipt.actor == world.owner.user and receipt.actor_label == actor_label(world.owner.user)
    assert receipt.member_ref == world.editor.pk and receipt.workspace_ref == world.workspace.pk
    event = AuditEvent.objects.get(action="memories.admin_erased")
    assert event.changes == {"versions": 2} and event.reason == "request"
    assert (
        event.actor == world.owner.user
        and event.target == f"member #{world.editor.pk}"
        and event.workspace == world.workspace
    )
    assert erase_member_memories(world.editor, actor=world.owner.user) == 0


def test_reverifying_a_receipt_finds_it_clean_and_audits_the_check(world):
    from governance.models import AuditEvent

    ids = _memories(world, 1)
    receipt = erasure.erase_memories(
        ids, operation=Operation.FORGET, workspace_id=world.workspace.pk, actor_label="agent"
    )
    result = erasure.reverify_receipt(receipt, actor=world.owner.user, reason="audit")
    assert result["clean"] is True
    receipt.refresh_from_db()
    assert receipt.verification == result
    event = AuditEvent.objects.get(action="receipt.reverified")
    assert event.changes["clean"] == [True, True] and event.reason == "audit"


def test_chunked_erasure_with_one_row_per_chunk_ends_and_keeps_a_rows_unreachable_mark(world):
    ids = _memories(world, 2, cite=False)
    marked = timezone.now() - timedelta(hours=5)
    MemoryVersion.objects.filter(pk=ids[1]).update(unreachable_at=marked)
    tally = erasure.erase_in_chunks(
        MemoryVersion.objects.filter(pk__in=ids),
        operation=Operation.CASCADE_DOCUMENT,
        workspace_id=world.workspace.pk,
        member_id=world.editor.pk,
        actor_label="cascade",
        filters={},
        chunk=1,
    )
    assert (tally.versions, tally.receipts, tally.chunks) == (2, 2, 2)  # and the run ends (an empty pick stops it)
    receipt = DeletionReceipt.objects.get(memory_version_ids=[ids[1]])
    assert receipt.unreachable_at == marked


def test_tallies_add_up():
    total = erasure.Tally(1, 2, 3)
    assert total.add(erasure.Tally(4, 5, 6)) is total
    assert (total.versions, total.receipts, total.chunks) == (5, 7, 9)


@pytest.mark.parametrize("backup_days", [0, 1, 7])
def test_a_receipt_states_what_may_still_hold_the_erased_bytes_and_until_when(settings, backup_days):
    settings.BACKUP_RETENTION_DAYS, settings.WAL_ARCHIVE_RETENTION_DAYS = backup_days, 3
    purged = timezone.now()
    window = erasure.residual_window(purged)
    vendor = connection.vendor
    assert set(window) == (
        {"database", "backups", "walArchives", "keyring", "kek"}
        if vendor == "postgresql"
        else {"database", "backups", "keyring", "kek"}
    )
    # SPEC §8.2: backups keep ciphertext only; the key store's own window bounds the content.
    assert (
        window["backups"]["content"] == "sealed"
        and window["keyring"]["retentionDays"] == settings.KEYRING_BACKUP_RETENTION_DAYS
    )
    assert window["database"]["engine"] == vendor and window["database"]["statement"]
    backups = window["backups"]
    assert backups["retentionDays"] == backup_days
    assert backups["until"] == (None if backup_days == 0 else (purged + timedelta(days=backup_days)).isoformat())
    assert backups["statement"] and (backup_days == 0 or f"{backup_days} days" in backups["statement"])
    if vendor == "postgresql":
        archives = window["walArchives"]
        assert archives["retentionDays"] == 3 and archives["until"] == (purged + timedelta(days=3)).isoformat()
        assert archives["content"] == "sealed" and "at most 3 days" in archives["statement"]


def test_what_backups_and_wal_archives_keep_of_rows_stored_before_encryption(settings):
    # Versions stored before encryption leave plaintext in backups and WAL archives: the receipt
    # says how many, and says it for both; with nothing archived, nothing is claimed.
    settings.BACKUP_RETENTION_DAYS, settings.WAL_ARCHIVE_RETENTION_DAYS = 7, 0
    window = erasure.residual_window(timezone.now(), unsealed=2)
    backups = window["backups"]
    assert backups["content"] == "partly_unsealed" and "2 of them were stored before encryption" in backups["statement"]
    assert "stored before encryption" not in erasure.residual_window(timezone.now())["backups"]["statement"]
    if connection.vendor == "postgresql":
        archives = window["walArchives"]
        assert archives["content"] == "partly_unsealed"
        assert (archives["retentionDays"], archives["until"]) == (0, None)
        assert archives["statement"].startswith("No WAL archiving is configured")
    else:
        assert "walArchives" not in window


def test_the_remaining_count_adds_up_across_id_chunks(world, monkeypatch):
    # SQLite reads the ids in chunks (its cap on bound parameters); every chunk is counted.
    ids = _memories(world, 5)
    monkeypatch.setattr(erasure, "_IN_CHUNK", 2)
    assert erasure.count_remaining(ids) == {"memory_version": 5, "citation": 5, "memory_embedding": 5}
    assert erasure.count_remaining([ids[0], max(ids) + 1000]) == {
        "memory_version": 1,
        "citation": 1,
        "memory_embedding": 1,
    }
    assert erasure.count_remaining([]) == {"memory_version": 0, "citation": 0, "memory_embedding": 0}


@pytest.mark.parametrize(
    ("manifest", "key_ids"),
    [
        ({"dataKeyIds": ["a1", 3, None, "b2"]}, ["a1", "b2"]),
        ({"artifacts": {}}, []),  # receipts written before data keys existed
        (["dataKeyIds"], []),  # a manifest that is not an object is read as empty, never raises
        (None, []),
    ],
)
def test_a_receipts_key_ids_are_the_strings_its_manifest_lists(manifest, key_ids):
    assert erasure.receipt_key_ids(DeletionReceipt(manifest=manifest)) == key_ids


@pytest.mark.django_db(transaction=True)
def test_space_is_reclaimed_on_postgresql_only_and_never_inside_a_transaction():
    assert erasure.reclaim_erased_space() is (connection.vendor == "postgresql")
    with transaction.atomic():
        assert erasure.reclaim_erased_space() is False
        assert erasure.checkpoint_sqlite_wal() is False
    if connection.vendor == "sqlite":
        assert erasure.checkpoint_sqlite_wal() is True


def test_the_owners_bulk_delete_receipts_name_the_owner_and_the_answer_adds_them_up(world):
    # Each member's receipt says who erased (the owner, by account and label); the answer's
    # totals are exactly the receipts' artifacts added up, nothing more.
    from governance.audit import actor_label

    make_agent(world.owner).remember(namespace="n", text="the owner's own note")
    editor = make_agent(world.editor)
    editor.remember(namespace="n", text="a note of the editor")
    editor.remember(namespace="m", text="another note of the editor")
    response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories")
    assert response.status_code == 200, response.content
    receipts = list(DeletionReceipt.objects.filter(pk__in=[int(i) for i in response.json()["receiptIds"]]))
    assert len(receipts) == 2 and {r.member_ref for r in receipts} == {world.owner.pk, world.editor.pk}
    assert all(r.actor == world.owner.user and r.actor_label == actor_label(world.owner.user) for r in receipts)
    added: dict[str, int] = {}
    for receipt in receipts:
        for artifact, count in receipt.manifest["artifacts"].items():
            added[artifact] = added.get(artifact, 0) + count
    assert response.json()["deleted"] == added and added["memory_version"] == 3


def test_the_owners_bulk_delete_leaves_an_audit_event(world):
    make_agent(world.editor).remember(namespace="n", text="one")
    make_agent(world.owner).remember(namespace="n", text="two")
    response = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories")
    assert response.status_code == 200
    event = AuditEvent.objects.get(action="memories.bulk_deleted", workspace=world.workspace)
    assert event.actor == world.owner.user
    assert event.changes["counts"]["memory_version"] == 2 and event.changes["members"] == 2
    assert "one" not in json.dumps(event.changes) and "two" not in json.dumps(event.changes)


def test_a_receipts_residual_until_is_read_from_its_kek_window_only():
    until = "2026-12-07T10:00:00+00:00"
    assert erasure.residual_until_of({"kek": {"until": until}}).isoformat() == until
    for residual in (None, [], {}, {"kek": None}, {"kek": "x"}, {"kek": {"until": None}}, {"kek": {"until": 5}}):
        assert erasure.residual_until_of(residual) is None  # an old or odd receipt names no instant, never raises


def test_an_unreachable_key_store_is_logged_by_the_errors_type_alone(monkeypatch, caplog):
    # The key store is another database: when it fails, the erase's verification counts every key
    # as not destroyed and the destroy step gives no fingerprint; the log names the error's type,
    # never its message (a driver's message may quote a query's parameters).
    from uuid import uuid4

    from django.db import OperationalError

    class Down:
        def present(self, key_ids):
            raise OperationalError("connection to 10.0.0.7 refused for key 3f2a")

        destroy_many = present

    monkeypatch.setattr(erasure, "key_store", Down)
    keys = [uuid4(), uuid4()]
    assert erasure.remaining_keys([]) == 0  # nothing asked: nothing remains, the store is not asked
    with caplog.at_level("ERROR", logger="retention.erasure"):
        assert erasure.remaining_keys(keys) == 2 and erasure.destroy_keys(keys) == []
    assert [r.getMessage() for r in caplog.records] == [
        "key store unreachable while verifying an erase: OperationalError",
        "data keys of erased memories could not be destroyed (the keyring sweep retries): OperationalError",
    ]


@pytest.mark.parametrize("state", ["scheduled", "off", "operator"])
def test_the_kek_window_names_the_keks_that_wrapped_the_keys_and_when_they_go(monkeypatch, state):
    # Every KEK that exists at the erase may have wrapped an erased key (a rotation under way
    # holds two): the receipt names them all, the rotation period, and residualUntil when the
    # schedule destroys them — none when it does not.
    from core.timestamps import iso
    from memoryapp.encryption import KekSchedule

    hours = 0 if state == "off" else 24
    schedule = KekSchedule(
        state=state,
        hours=hours,
        current="kek-b",
        live=("kek-b", "kek-a"),
        created_at=timezone.now() - timedelta(hours=2),
    )
    monkeypatch.setattr(erasure, "kek_schedule", lambda: schedule)
    purged, wrapped = timezone.now(), [{"fingerprint": "3f2a"}]
    kek = erasure.residual_window(purged, wrapped_keys=wrapped)["kek"]
    until = schedule.destroyed_by(purged)
    assert (until is None) is (state != "scheduled")
    assert (kek["state"], kek["rotationHours"], kek["kekIds"]) == (state, hours, ["kek-b", "kek-a"])
    assert kek["until"] == iso(until) and kek["wrappedKeys"] == wrapped
    statement = kek["statement"]
    assert "a copy of the key store's files made before the erase" in statement
    named = {
        "scheduled": ["key-encryption key kek-b, kek-a.", "every 24 hours", f"by {iso(until)} (residualUntil)"],
        "off": ["the key kek-b that wrapped"],
        "operator": ["keys (kek-b, kek-a) are set by the operator"],
    }[state]
    assert all(words in statement for words in named), statement


def test_a_kek_schedule_that_cannot_be_read_promises_nothing_and_logs_the_errors_type(monkeypatch, caplog):
    from django.db import OperationalError

    def unreadable():
        raise OperationalError("could not open /var/lib/memory/kek for key 3f2a")

    monkeypatch.setattr(erasure, "kek_schedule", unreadable)
    wrapped = [{"fingerprint": "3f2a"}]
    with caplog.at_level("ERROR", logger="retention.erasure"):
        kek = erasure.residual_window(timezone.now(), wrapped_keys=wrapped)["kek"]
    assert set(kek) == {"state", "kekIds", "until", "statement", "wrappedKeys"}
    assert (kek["state"], kek["kekIds"], kek["until"], kek["wrappedKeys"]) == ("unknown", [], None, wrapped)
    assert kek["statement"]
    assert [r.getMessage() for r in caplog.records] == [
        "KEK schedule unknown while writing a receipt: OperationalError"
    ]


def test_the_key_stores_window_names_its_engine_and_what_that_engine_did(settings):
    # SQLite overwrites destroyed keys and truncates its WAL; PostgreSQL keeps dead tuples until
    # VACUUM: the key store's window says which, and a backup window of sealed rows says no more.
    from django.db import connections

    from memoryapp.keyring import KEYRING

    settings.KEYRING_BACKUP_RETENTION_DAYS, settings.BACKUP_RETENTION_DAYS = 0, 7
    window = erasure.residual_window(timezone.now())
    keyring, engine = window["keyring"], connections[KEYRING].vendor
    assert keyring["engine"] == engine and (keyring["retentionDays"], keyring["until"]) == (0, None)
    overwritten = "overwritten with zeros and its write-ahead log truncated"
    assert (overwritten in keyring["statement"]) is (engine == "sqlite")
    assert keyring["statement"].startswith(
        "The data keys were destroyed in the key store (a database apart from the data's, never in its backups)"
        + (", " if engine == "sqlite" else "; ")
    )
    assert window["backups"]["statement"].endswith(
        "(see keyring and kek for the copies of the key store that remain until residualUntil)."
    )
