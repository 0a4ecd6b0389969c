"""Review finding (issue 22 row 7 follow-up): dropping the newest verification record AND setting
the shown result back to the record before it leaves no trace. Nothing anchors how many records a
receipt has, so a re-verification that found leftovers (clean: false) can be erased from the
receipt by someone with database access and `verify_chain` still says intact."""

from __future__ import annotations

import copy
import importlib

import pytest
from django.apps import apps
from django.db import transaction

from retention import receipt_checks
from retention import receipts as chain
from retention.erasure import reverify_receipt
from retention.models import DeletionReceipt, ReceiptChain
from tests.receipts.support import api_report, chain_of, forget_some, run_verify
from tests.support import on_postgres


def test_a_dirty_reverification_truncated_with_the_shown_result_rolled_back_is_reported(world, four):
    target = DeletionReceipt.objects.get(pk=four[0].pk)
    chain.add_verification(
        target, {**target.verification, "clean": False, "note": "leftover found"}, trigger="reverification"
    )
    target.save(update_fields=["verifications", "verification"])
    assert chain.verify_chain(world.workspace.pk)["intact"] is True  # the dirty result, as written
    records = target.verifications[:-1]
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=records, verification=records[-1]["verification"])
    assert chain.verify_chain(world.workspace.pk)["intact"] is False


# --- every way of changing a re-verified receipt's records, seen by every checker --------------------------
def reverified(world, four) -> DeletionReceipt:
    """four[1] with three records: the receipt's own, a dirty re-verification and a clean one."""
    target = DeletionReceipt.objects.get(pk=four[1].pk)
    with transaction.atomic():
        chain.add_verification(
            target,
            {**target.verification, "clean": False, "note": "leftover found"},
            trigger=chain.REVERIFICATION_TRIGGER,
        )
        target.save(update_fields=["verifications", "verification"])
    reverify_receipt(target, actor=None, reason="after the sweep")
    return DeletionReceipt.objects.get(pk=target.pk)


def store(receipt: DeletionReceipt, records: list[dict], shown: dict | None = None) -> None:
    DeletionReceipt.objects.filter(pk=receipt.pk).update(
        verifications=records, verification=shown if shown is not None else records[-1]["verification"]
    )


def truncate(r):
    store(r, r.verifications[:-1])


def truncate_to_first(r):
    store(r, r.verifications[:1])


def drop_middle(r):
    store(r, [r.verifications[0], r.verifications[2]])


def reorder(r):
    store(r, [r.verifications[0], r.verifications[2], r.verifications[1]])


def edit_record(r):
    records = copy.deepcopy(r.verifications)
    records[1]["verification"]["clean"] = True
    store(r, records, shown=r.verifications[-1]["verification"])


def roll_back_shown(r):
    store(r, r.verifications, shown=r.verifications[1]["verification"])


def clear_anchor_and_truncate(r):
    ReceiptChain.objects.filter(workspace_ref=r.workspace_ref).update(
        verification_anchors=None, anchors_signature="", anchors_key_id=""
    )
    truncate_to_first(r)


def rewrite_anchor_and_truncate(r):
    head = ReceiptChain.objects.get(workspace_ref=r.workspace_ref)
    anchors = {**head.verification_anchors, str(r.chain_seq): [2, r.verifications[1]["sha256"]]}
    ReceiptChain.objects.filter(pk=head.pk).update(verification_anchors=anchors)
    truncate(r)


TAMPERS = {
    "truncate": (truncate, chain.VERIFICATION_CHANGED),
    "truncate_to_first": (truncate_to_first, chain.VERIFICATION_CHANGED),
    "drop_middle": (drop_middle, chain.VERIFICATION_CHANGED),
    "reorder": (reorder, chain.VERIFICATION_CHANGED),
    "edit_record": (edit_record, chain.VERIFICATION_CHANGED),
    "roll_back_shown": (roll_back_shown, chain.VERIFICATION_CHANGED),
    "clear_anchor_and_truncate": (clear_anchor_and_truncate, chain.ANCHOR_CHANGED),
    "rewrite_anchor_and_truncate": (rewrite_anchor_and_truncate, chain.ANCHOR_CHANGED),
}


def reports(world) -> dict[str, dict]:
    status, command = run_verify("--workspace", str(world.workspace.pk))
    return {
        "verify_chain": chain.verify_chain(world.workspace.pk),
        "verify_chain_bounded": receipt_checks.verify_chain_bounded(world.workspace.pk),
        "verify_receipts": {**chain_of(command, world.workspace), "status": status},
        "endpoint": api_report(world.owner),
    }


def test_a_normal_reverification_leaves_every_checker_saying_intact(world, four):
    target = reverified(world, four)
    assert [r["seq"] for r in target.verifications] == [1, 2, 3]
    head = ReceiptChain.objects.get(workspace_ref=world.workspace.pk)
    assert head.verification_anchors == {str(target.chain_seq): [3, target.verifications[-1]["sha256"]]}
    for name, report in reports(world).items():
        assert report["intact"] is True and report["firstBreak"] is None, name


@pytest.mark.parametrize("tamper", TAMPERS)
def test_every_change_to_a_reverified_receipts_records_is_reported_by_every_checker(world, four, tamper):
    target = reverified(world, four)
    change, reason = TAMPERS[tamper]
    change(target)
    for name, report in reports(world).items():
        assert report["intact"] is False, name
        assert report["firstBreak"]["reason"] == reason, (name, report["firstBreak"])
        if reason == chain.VERIFICATION_CHANGED:
            assert report["firstBreak"]["receiptId"] == str(target.pk), name
    assert reports(world)["verify_receipts"]["status"] == 1


def test_a_receipt_never_reverified_cannot_be_given_records_without_an_anchor(world, four):
    """Records copied onto a receipt the anchor does not name (even correctly linked ones from a
    state the anchor moved past) are reported: only the receipt's own first record is unanchored."""
    target = reverified(world, four)
    ReceiptChain.objects.filter(workspace_ref=world.workspace.pk).update(**chain.signed_anchors(world.workspace.pk, {}))
    assert chain.verify_chain(world.workspace.pk)["firstBreak"] == {
        "receiptId": str(target.pk),
        "chainSeq": target.chain_seq,
        "reason": chain.VERIFICATION_CHANGED,
        "verificationSeq": 2,
    }


def test_the_migration_anchors_receipts_reverified_before_it(world, four):
    target = reverified(world, four)
    ReceiptChain.objects.update(verification_anchors=None, anchors_signature="", anchors_key_id="")  # as before 0012
    assert chain.verify_chain(world.workspace.pk)["intact"] is False  # the receipt's late records are unanchored
    importlib.import_module("retention.migrations.0013_receipt_verification_anchors").anchor_existing(apps, None)
    assert chain.verify_chain(world.workspace.pk)["intact"] is True
    truncate(target)
    assert chain.verify_chain(world.workspace.pk)["firstBreak"]["reason"] == chain.VERIFICATION_CHANGED


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL")
def test_reverifications_and_erases_at_once_keep_every_anchor(world, agent):
    """Twelve re-verifications (two per receipt) alongside four forgets, on real threads: the head's
    row lock keeps every receipt's anchor, none overwritten by a concurrent re-verification."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    made = forget_some(agent, 6)
    ids = [
        agent.remember(namespace="n", key=f"late{i}", text=f"late note {i}").json()["memory"]["id"] for i in range(4)
    ]

    def work(i):
        try:
            if i < 12:
                return reverify_receipt(made[i % 6], actor=None, reason="at once")["clean"]
            return agent.forget(memoryId=ids[i - 12]).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(16)))
    assert results == [True] * 12 + [200] * 4
    head = ReceiptChain.objects.get(workspace_ref=world.workspace.pk)
    stored = {
        str(r.chain_seq): [len(r.verifications), r.verifications[-1]["sha256"]]
        for r in DeletionReceipt.objects.filter(pk__in=[r.pk for r in made])
    }
    assert head.verification_anchors == stored and all(count == 3 for count, _ in stored.values())
    assert chain.verify_chain(world.workspace.pk)["intact"] is True and head.seq == 10
