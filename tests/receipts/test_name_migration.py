"""Migration 0014 seals the names of receipts written before (docs/receipts.md "Names in
receipts"): their plain namespace and key become keyed digests, and they keep verifying — on the
server, in a member's export made after it, and in one saved before it — without being re-signed:
hash, signature, links and verification records stay; a signed redaction record binds the hash
the fields have now to the one they were signed with. Every way to tamper with it is reported."""

from __future__ import annotations

import copy
import importlib
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.apps import apps
from django.test import Client

from memoryapp.keyring import DataKey
from retention import receipt_keys, receipt_names
from retention import receipts as chain
from retention.erasure import reverify_receipt
from retention.models import DeletionReceipt
from tests.admin.support import admin_url, browser
from tests.export.support import download, exported
from tests.receipts.support import (
    api_report,
    body_of,
    chain_of,
    generated_names,
    leaks,
    own_receipts,
    run_script,
    run_verify,
)
from tests.support import client_for, make_agent

pytestmark = pytest.mark.django_db

PROOF = ("sha256", "previous_hash", "key_id", "signature", "chain_seq", "verifications")


def migrate() -> None:
    importlib.import_module("retention.migrations.0015_receipt_filter_digests").seal_names(apps, None)


class Before:
    """Receipts written the way they were before names were sealed (plain names hashed and
    signed), a member's export saved then, and the names."""

    def __init__(self, world, monkeypatch):
        monkeypatch.setattr(receipt_names, "sealed_manifest", lambda manifest, **kwargs: manifest)
        self.names = generated_names(4, seed=14) + [("travel", "seat")]
        agent = make_agent(world.editor)
        assert agent.remember(namespace="travel", key="window", text="kept").status_code == 201
        self.receipts = []
        for n, (namespace, key) in enumerate(self.names):
            assert agent.remember(namespace=namespace, key=key, text="Prefers the aisle").status_code == 201
            self.receipts.append(
                DeletionReceipt.objects.get(pk=agent.forget(namespace=namespace, key=key).json()["receiptId"])
            )
            if n == 1:
                owner = make_agent(world.owner)  # another member's receipt between them in the chain
                assert owner.remember(namespace="owner_ns", key="owner_key", text="x").status_code == 201
                self.receipts.append(
                    DeletionReceipt.objects.get(
                        pk=owner.forget(namespace="owner_ns", key="owner_key").json()["receiptId"]
                    )
                )
        reverify_receipt(self.receipts[0], actor=None, reason="a record after the receipt, anchored")
        monkeypatch.undo()
        assert all(r.manifest["filters"].get("namespace") for r in self.receipts)  # plain, as before
        self.saved_export = json.loads(
            download(client_for(world.editor), world.workspace)[1]
        )  # as then: plain names (today's schema refuses them)
        self.proof = {r.pk: [getattr(DeletionReceipt.objects.get(pk=r.pk), f) for f in PROOF] for r in self.receipts}

    @property
    def words(self) -> list[str]:
        return [w for pair in self.names for w in pair if w not in ("travel",)] + ["owner_ns", "owner_key"]


@pytest.fixture
def before(world, monkeypatch) -> Before:
    return Before(world, monkeypatch)


def stored(receipt: DeletionReceipt) -> DeletionReceipt:
    return DeletionReceipt.objects.get(pk=receipt.pk)


def test_the_migration_seals_the_names_and_keeps_every_proof(world, before, tmp_path):
    assert run_verify()[0] == 0
    migrate()
    for receipt in before.receipts:
        now = stored(receipt)
        assert set(now.manifest["filters"]) == {"namespaceHmac", "keyHmac"}
        assert [getattr(now, f) for f in PROOF] == before.proof[
            receipt.pk
        ]  # never re-signed: hash, link, signature, records
        assert now.redaction["redactedSha256"] == chain.digest_of(now).hex() != now.sha256
        assert leaks(json.dumps(now.manifest, ensure_ascii=False), before.words) == []
    status, report = run_verify()
    assert status == 0 and chain_of(report, world.workspace)["intact"] is True
    assert chain.verify_chain(world.workspace.pk)["intact"] is True and api_report(world.owner)["intact"] is True
    once = [(stored(r).manifest, stored(r).redaction) for r in before.receipts]
    migrate()  # twice: nothing left to seal, nothing changes
    assert [(stored(r).manifest, stored(r).redaction) for r in before.receipts] == once

    keys = Client().get("/.well-known/receipt-signing-key").json()
    result = run_script(
        tmp_path, before.saved_export, keys
    )  # saved before the migration: plain names, verifies as it did
    assert result.returncode == 0 and result.stdout.count(": ok") == len(before.saved_export["receipts"]), (
        result.stdout + result.stderr
    )
    document = exported(world.editor)
    assert leaks(json.dumps(document["receipts"], ensure_ascii=False), before.words) == []
    result = run_script(tmp_path, document, keys)
    assert result.returncode == 0 and result.stdout.count(": ok") == len(document["receipts"]), (
        result.stdout + result.stderr
    )
    assert {r["sha256"] for r in document["receipts"]} == {
        r["sha256"] for r in before.saved_export["receipts"]
    }  # the saved copy still matches the server's chain


def test_after_the_migration_the_member_resolves_what_lives_and_no_admin_reads_a_name(world, before, staff):
    migrate()
    travel = next(r for r in before.receipts if r.pk == before.receipts[-1].pk)
    (shown,) = [r for r in own_receipts(world.editor) if r["id"] == str(travel.pk)]
    assert shown["resolvedFilters"] == {"namespace": "travel"}  # "travel/window" lives; "seat" was forgotten
    for role, user in staff.all():
        client = browser(user)
        pages = [
            client.get(admin_url(DeletionReceipt, "changelist")),
            client.get(admin_url(DeletionReceipt, "export_csv")),
        ]
        pages += [client.get(admin_url(DeletionReceipt, "change", r.pk)) for r in before.receipts]
        for response in pages:
            assert leaks(body_of(response), before.words + ["seat"]) == [], (role, response.wsgi_request.path)


def tamper_field(r, others):
    DeletionReceipt.objects.filter(pk=r.pk).update(actor_label="someone else")


def drop_record(r, others):
    DeletionReceipt.objects.filter(pk=r.pk).update(redaction=None)


def copy_record(r, others):
    DeletionReceipt.objects.filter(pk=r.pk).update(redaction=stored(others[0]).redaction)


def edit_record_hash(r, others):
    DeletionReceipt.objects.filter(pk=r.pk).update(
        actor_label="x",
        redaction={
            **r.redaction,
            "redactedSha256": chain.digest_of(DeletionReceipt(**{**_fields(r), "actor_label": "x"})).hex(),
        },
    )


def resign_record(r, others):
    intruder = Ed25519PrivateKey.generate()
    redaction = {
        **r.redaction,
        "signature": intruder.sign(
            chain.redaction_digest(r.workspace_ref, r.chain_seq, r.sha256, r.redaction["redactedSha256"])
        ).hex(),
    }
    DeletionReceipt.objects.filter(pk=r.pk).update(redaction=redaction)


def own_key_record(r, others):
    intruder = Ed25519PrivateKey.generate()
    fake = {
        "redactedSha256": r.redaction["redactedSha256"],
        "keyId": receipt_keys.key_id(intruder.public_key()),
        "signature": intruder.sign(
            chain.redaction_digest(r.workspace_ref, r.chain_seq, r.sha256, r.redaction["redactedSha256"])
        ).hex(),
    }
    DeletionReceipt.objects.filter(pk=r.pk).update(redaction=fake)


def put_names_back_plain(r, others):
    manifest = copy.deepcopy(r.manifest)
    manifest["filters"] = {"namespace": "travel", "key": "seat"}
    DeletionReceipt.objects.filter(pk=r.pk).update(manifest=manifest, redaction=None)


def _fields(r):
    return {f.attname: getattr(r, f.attname) for f in r._meta.concrete_fields}


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (tamper_field, chain.HASH_MISMATCH),
        (drop_record, chain.HASH_MISMATCH),
        (copy_record, chain.HASH_MISMATCH),
        (edit_record_hash, chain.BAD_SIGNATURE),
        (resign_record, chain.BAD_SIGNATURE),
        (own_key_record, chain.UNKNOWN_KEY),
        (
            put_names_back_plain,
            chain.HASH_MISMATCH,
        ),  # a guess of the names does not restore the signed hash either (the salt)
    ],
)
def test_every_change_to_a_redacted_receipt_is_reported(world, before, tamper, reason, tmp_path):
    migrate()
    victim, other = stored(before.receipts[3]), stored(before.receipts[0])  # [2] is the owner's
    assert victim.member_ref == world.editor.pk
    tamper(victim, [other])
    report = chain.verify_chain(world.workspace.pk)
    assert report["firstBreak"] == {"receiptId": str(victim.pk), "chainSeq": victim.chain_seq, "reason": reason}
    assert run_verify()[0] == 1 and api_report(world.owner)["firstBreak"]["reason"] == reason
    if tamper is not put_names_back_plain:
        result = run_script(tmp_path, exported(world.editor), Client().get("/.well-known/receipt-signing-key").json())
        (line,) = [line for line in result.stdout.splitlines() if line.startswith(f"receipt {victim.pk} ")]
        assert result.returncode == 1 and not line.endswith(": ok"), line


def test_a_receipt_broken_before_the_migration_loses_its_names_and_stays_broken(world, before):
    victim = before.receipts[1]
    DeletionReceipt.objects.filter(pk=victim.pk).update(actor_label="edited before the migration")
    assert chain.verify_chain(world.workspace.pk)["firstBreak"]["reason"] == chain.HASH_MISMATCH
    migrate()
    now = stored(victim)
    assert now.redaction is None and set(now.manifest["filters"]) == {
        "namespaceHmac",
        "keyHmac",
    }  # no attestation of a broken receipt
    assert chain.verify_chain(world.workspace.pk)["firstBreak"] == {
        "receiptId": str(victim.pk),
        "chainSeq": victim.chain_seq,
        "reason": chain.HASH_MISMATCH,
    }


def test_names_of_an_ended_membership_are_sealed_under_a_key_nobody_keeps(world, before):
    from django.utils import timezone

    type(world.editor).objects.filter(pk=world.editor.pk).update(left_at=timezone.now())
    DataKey.objects.using("keyring").filter(owner=receipt_names.OWNER).delete()
    migrate()
    assert (
        not DataKey.objects.using("keyring")
        .filter(key_id=receipt_names.name_key_id(world.workspace.pk, world.editor.pk, world.editor.period))
        .exists()
    )
    assert all(set(stored(r).manifest["filters"]) == {"namespaceHmac", "keyHmac"} for r in before.receipts)
    assert chain.verify_chain(world.workspace.pk)["intact"] is True


@pytest.mark.django_db(transaction=True)
def test_the_real_migration_from_0013_seals_named_receipts_and_they_verify():
    """Through the migration executor: receipts written at 0013 with plain names (sealed and
    signed as then), migrated forward, verify and name nothing."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    executor = MigrationExecutor(connection)
    before_state, latest = [("retention", "0013_receipt_verification_anchors")], executor.loader.graph.leaf_nodes()
    executor.migrate(before_state)
    try:
        old_apps = executor.loader.project_state(before_state).apps
        OldReceipt, OldChain = (
            old_apps.get_model("retention", "DeletionReceipt"),
            old_apps.get_model("retention", "ReceiptChain"),
        )
        previous, now = chain.ZERO_HASH, timezone.now()
        for seq, (namespace, key) in enumerate(generated_names(3, seed=13), 1):
            receipt = OldReceipt(
                operation="forget",
                workspace_ref=88,
                member_ref=None,
                actor_label="agent",
                manifest={"artifacts": {"memory_version": 1}, "filters": {"namespace": namespace, "key": key}},
                memory_version_ids=[seq],
                requested_at=now,
                unreachable_at=now,
                purged_at=now,
                residual={},
                verification={"clean": True},
                chain_seq=seq,
                previous_hash=previous,
                salt=f"{seq:032x}",
                proof_format=2,
                verifications=[],
            )
            chain.seal(receipt)
            chain.add_verification(receipt, {"clean": True}, trigger=chain.RECEIPT_TRIGGER)
            receipt.save()
            previous = receipt.sha256
        OldChain.objects.create(
            workspace_ref=88, seq=3, head_hash=previous, head_receipt_ref=receipt.pk, **chain.signed_anchors(88, {})
        )
        words = [w for pair in generated_names(3, seed=13) for w in pair]
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(latest)
    migrated = list(DeletionReceipt.objects.filter(workspace_ref=88).order_by("chain_seq"))
    assert all(r.redaction and set(r.manifest["filters"]) == {"namespaceHmac", "keyHmac"} for r in migrated)
    assert leaks(json.dumps([r.manifest for r in migrated], ensure_ascii=False), words) == []
    assert chain.verify_chain(88)["intact"] is True
