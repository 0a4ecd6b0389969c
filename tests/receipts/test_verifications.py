"""A receipt's verification result is proven like the receipt (issue 22 row 7, docs/receipts.md):
the erase's own verification and every re-verification is an appended record, hashed, linked to
the receipt (or the record before it) and signed, and the result shown with the receipt is its
newest record. Someone with database access who edits the result — `clean` turned true with a
note, a count lowered, a record removed, copied or forged — is reported by `verify_receipts`, the
verify endpoint, the owner's page and the offline script. Receipts written before records existed
verify as before, and are counted as unproven."""

from __future__ import annotations

import copy
import importlib
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.apps import apps
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from retention import receipt_keys
from retention import receipts as chain
from retention.erasure import reverify_receipt
from retention.models import DeletionReceipt
from tests.export.support import exported
from tests.receipts.support import FUZZ, STORABLE, api_report, chain_of, forget_some, run_script, run_verify
from tests.support import make_agent

CHANGED = "verification_changed"


def fresh(receipt: DeletionReceipt) -> DeletionReceipt:
    return DeletionReceipt.objects.get(pk=receipt.pk)


def first_break(world) -> dict | None:
    return chain.verify_chain(world.workspace.pk)["firstBreak"]


def at(receipt: DeletionReceipt, seq: int | None) -> dict:
    return {"receiptId": str(receipt.pk), "chainSeq": receipt.chain_seq, "reason": CHANGED, "verificationSeq": seq}


# --- as written -------------------------------------------------------------------------------------------
def test_every_receipt_carries_its_verification_as_a_signed_record_linked_to_it(world, four):
    for receipt in map(fresh, four):
        (record,) = receipt.verifications
        assert record["seq"] == 1 and record["trigger"] == "receipt" and record["previousHash"] == receipt.sha256
        assert record["verification"] == receipt.verification and receipt.verification["clean"] is True
        digest = chain.verification_digest(record)
        assert digest.hex() == record["sha256"] and record["keyId"] == receipt.key_id
        receipt_keys.signing_key().public_key().verify(bytes.fromhex(record["signature"]), digest)
        assert receipt.proof_format == chain.PROOF_FORMAT == 2
    report = chain.verify_chain(world.workspace.pk)
    assert report["intact"] is True and report["unprovenVerifications"] == 0


def test_reverification_appends_a_record_and_the_chain_stays_intact(world, four):
    reverify_receipt(four[1], actor=None, reason="periodic check")
    reverify_receipt(four[1], actor=None, reason="again")
    receipt = fresh(four[1])
    assert [(r["seq"], r["trigger"]) for r in receipt.verifications] == [
        (1, "receipt"),
        (2, "reverification"),
        (3, "reverification"),
    ]
    assert [r["previousHash"] for r in receipt.verifications] == [receipt.sha256] + [
        r["sha256"] for r in receipt.verifications[:2]
    ]
    assert receipt.verification == receipt.verifications[-1]["verification"]
    assert run_verify()[0] == 0 and api_report(world.owner)["intact"] is True


# --- tampering, as someone with database access --------------------------------------------------------
def test_a_verification_set_clean_with_a_note_in_the_database_is_reported(world, four):
    """The issue's reproduction: `UPDATE … SET verification = '{"clean": true, "note": …}'`."""
    target = four[2]
    DeletionReceipt.objects.filter(pk=target.pk).update(
        verification={**target.verification, "clean": True, "note": "checked by hand"}
    )
    status, report = run_verify("--workspace", str(world.workspace.pk))
    assert status == 1 and report["intact"] is False
    assert chain_of(report, world.workspace)["firstBreak"] == at(target, None)
    body = api_report(world.owner)
    assert (
        body["intact"] is False
        and body["firstBreak"]["receiptId"] == str(target.pk)
        and body["firstBreak"]["reason"] == CHANGED
    )
    client = Client()
    client.force_login(world.owner.user)
    page = client.get(f"/w/{world.workspace.pk}/settings/ask-history/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f"Chain broken at receipt #{target.pk}" in page and "verification result was changed" in page


VERIFICATION_EDITS = st.one_of(
    st.just(("clean", False)),
    st.tuples(
        st.just("remaining"),
        st.fixed_dictionaries({"memory_version": st.integers(0, 10**6), "citation": st.integers(0, 9)}),
    ),
    st.tuples(st.just("checkedAt"), st.sampled_from(["2020-01-01T00:00:00+00:00", "2099-12-31T23:59:59+00:00"])),
    st.tuples(
        st.text(STORABLE, min_size=1, max_size=12),
        st.one_of(st.booleans(), st.integers(-(2**53), 2**53), st.text(STORABLE, max_size=20)),
    ),
)


@FUZZ
@given(position=st.integers(0, 3), edit=VERIFICATION_EDITS, in_record=st.booleans())
def test_generated_edits_of_a_verification_are_reported_at_its_receipt(world, four, position, edit, in_record):
    """Edited in the result shown, or in the sealed record (and the shown copy with it)."""
    target = fresh(four[position])
    name, value = edit
    edited = {**target.verification, name: value}
    if edited == target.verification:
        return  # not an edit
    records = copy.deepcopy(target.verifications)
    if in_record:
        records[0]["verification"] = edited
    try:
        DeletionReceipt.objects.filter(pk=target.pk).update(verification=edited, verifications=records)
        assert first_break(world) == at(target, 1 if in_record else None)
    finally:
        DeletionReceipt.objects.filter(pk=target.pk).update(
            verification=target.verification, verifications=target.verifications
        )
    assert chain.verify_chain(world.workspace.pk)["intact"] is True


def test_removed_reordered_or_copied_records_are_reported(world, four):
    reverify_receipt(four[0], actor=None)
    target = fresh(four[0])
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=[])
    assert first_break(world) == at(target, None)
    DeletionReceipt.objects.filter(pk=target.pk).update(
        verifications=target.verifications[1:]
    )  # the erase's own result dropped
    assert first_break(world) == at(target, 1)
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=target.verifications[::-1])
    assert first_break(world) == at(target, 1)
    DeletionReceipt.objects.filter(pk=target.pk).update(
        verifications=target.verifications[:1]
    )  # the newest dropped, the shown copy kept
    assert first_break(world) == at(target, None)
    other = fresh(four[1])
    DeletionReceipt.objects.filter(pk=target.pk).update(
        verifications=other.verifications, verification=other.verification
    )
    assert first_break(world) == at(target, 1)
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=["not a record", 7], verification={})
    assert first_break(world) == at(target, 1)


def test_a_forged_record_fails_on_the_signature(world, four):
    """Someone who appends a record with the right hash and link cannot sign it."""
    target = fresh(four[3])
    forged = {
        "seq": 2,
        "trigger": "reverification",
        "previousHash": target.verifications[0]["sha256"],
        "verification": {**target.verification, "note": "all good"},
    }
    intruder = Ed25519PrivateKey.generate()
    digest = chain.verification_digest(forged)
    forged.update(sha256=digest.hex(), keyId=target.key_id, signature=intruder.sign(digest).hex())
    DeletionReceipt.objects.filter(pk=target.pk).update(
        verifications=[*target.verifications, forged], verification=forged["verification"]
    )
    assert first_break(world) == {**at(target, 2), "reason": chain.BAD_SIGNATURE}
    forged["keyId"] = receipt_keys.key_id(intruder.public_key())
    DeletionReceipt.objects.filter(pk=target.pk).update(verifications=[*target.verifications, forged])
    assert first_break(world) == {**at(target, 2), "reason": chain.UNKNOWN_KEY}


def test_a_member_sees_a_changed_verification_of_their_own_receipt(world, four):
    DeletionReceipt.objects.filter(pk=four[0].pk).update(verification={"clean": True})
    assert api_report(world.editor)["firstBreak"] == {**at(four[0], None), "own": True}


# --- receipts written before verifications were proven ---------------------------------------------------
def as_written_before(world) -> list[DeletionReceipt]:
    """Turn every receipt into one written before this change (proof format 1, no records) and
    reseal the chains the way the migration that introduced them did."""
    DeletionReceipt.objects.update(proof_format=1, verifications=[])
    importlib.import_module("retention.migrations.0004_seal_existing_receipts").seal_existing(apps, None)
    return list(DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk).order_by("chain_seq"))


def test_older_receipts_without_records_verify_as_before_and_are_counted_unproven(world, four):
    old = as_written_before(world)
    for receipt in old:  # the hash is the 13 fields and the salt, exactly as before
        assert "proofFormat" not in chain.canonical_fields(receipt)
    report = chain.verify_chain(world.workspace.pk)
    assert report["intact"] is True and report["unprovenVerifications"] == 4
    DeletionReceipt.objects.filter(pk=old[1].pk).update(verification={"clean": True, "note": "not covered"})
    assert (
        chain.verify_chain(world.workspace.pk)["intact"] is True
    )  # what docs/receipts.md says an older receipt cannot prove
    reverify_receipt(old[1], actor=None, reason="prove it from now on")
    proven = fresh(old[1])
    assert [(r["seq"], r["trigger"], r["previousHash"]) for r in proven.verifications] == [
        (1, "reverification", proven.sha256)
    ]
    report = chain.verify_chain(world.workspace.pk)
    assert report["intact"] is True and report["unprovenVerifications"] == 3
    DeletionReceipt.objects.filter(pk=old[1].pk).update(verification={**proven.verification, "clean": False})
    assert first_break(world) == at(proven, None)


def test_a_newer_receipt_cannot_pass_for_an_older_one(world, four):
    """Dropping the records and the format marker changes the receipt's hash."""
    DeletionReceipt.objects.filter(pk=four[1].pk).update(proof_format=1, verifications=[], verification={"clean": True})
    assert first_break(world) == {"receiptId": str(four[1].pk), "chainSeq": 2, "reason": chain.HASH_MISMATCH}


# --- offline ------------------------------------------------------------------------------------------------------
def test_the_documented_script_checks_every_verification_offline(world, agent, tmp_path):
    made = forget_some(agent, 3)
    reverify_receipt(made[1], actor=None)
    forget_some(make_agent(world.owner), 1, tag="owner")
    document = exported(world.editor)
    assert all(r["proofFormat"] == 2 and r["verifications"] for r in document["receipts"])
    keys = Client().get("/.well-known/receipt-signing-key").json()
    result = run_script(tmp_path, document, keys)
    assert result.returncode == 0 and result.stdout.count(": ok") == 3, result.stdout + result.stderr

    shown = json.loads(json.dumps(document))
    victim = next(r for r in shown["receipts"] if r["id"] == str(made[0].pk))
    victim["verification"]["clean"] = not victim["verification"]["clean"]
    result = run_script(tmp_path, shown, keys)
    assert (
        result.returncode == 1
        and f"receipt {victim['id']} (chain position {victim['chainSeq']}): verification changed" in result.stdout
    )

    sealed = json.loads(json.dumps(document))
    victim = next(r for r in sealed["receipts"] if r["id"] == str(made[1].pk))
    victim["verifications"][1]["verification"]["remaining"]["memory_version"] = 0
    victim["verifications"][1]["verification"]["note"] = "fine"
    victim["verification"] = victim["verifications"][1]["verification"]
    result = run_script(tmp_path, sealed, keys)
    (line,) = [line for line in result.stdout.splitlines() if line.startswith(f"receipt {victim['id']} ")]
    assert result.returncode == 1 and "verification changed" in line and result.stdout.count(": ok") == 2

    stripped = json.loads(json.dumps(document))
    stripped["receipts"][0]["verifications"] = []
    result = run_script(tmp_path, stripped, keys)
    assert result.returncode == 1 and "verification changed" in result.stdout


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_receipts_sealed_before_it_verifiable():
    """Receipts sealed at migration 0006 (the salt, no records) verify after 0007 exactly as before."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    executor = MigrationExecutor(connection)
    before, latest = [("retention", "0006_receipt_salt")], executor.loader.graph.leaf_nodes()
    executor.migrate(before)
    try:
        old_apps = executor.loader.project_state(before).apps
        OldReceipt, OldChain = (
            old_apps.get_model("retention", "DeletionReceipt"),
            old_apps.get_model("retention", "ReceiptChain"),
        )
        previous, now = chain.ZERO_HASH, timezone.now()
        for seq in (1, 2, 3):
            receipt = OldReceipt(
                operation="forget",
                workspace_ref=77,
                member_ref=5,
                actor_label="agent",
                manifest={"artifacts": {"memory_version": 1}},
                memory_version_ids=[seq],
                requested_at=now,
                unreachable_at=now,
                purged_at=now,
                residual={},
                verification={"clean": True, "remaining": {"memory_version": 0}},
                chain_seq=seq,
                previous_hash=previous,
                salt=f"{seq:032x}",
            )
            chain.seal(receipt)
            receipt.save()
            previous = receipt.sha256
        OldChain.objects.create(workspace_ref=77, seq=3, head_hash=previous, head_receipt_ref=receipt.pk)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
    migrated = list(DeletionReceipt.objects.filter(workspace_ref=77).order_by("chain_seq"))
    assert [(r.proof_format, r.verifications) for r in migrated] == [(1, [])] * 3
    report = chain.verify_chain(77)
    assert report["intact"] is True and report["receipts"] == 3 and report["unprovenVerifications"] == 3
