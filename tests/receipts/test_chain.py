"""Receipts anyone can verify (issue 17 §4, docs/receipts.md): each workspace's receipts form a
hash chain signed with Ed25519; `verify_receipts` and the verify endpoint report exactly the
receipt someone with database access changed, removed or re-signed."""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import json
from datetime import timedelta
from io import StringIO

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F
from django.test import Client
from django.utils import translation
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY

from retention import receipt_keys, receipt_names
from retention import receipts as chain
from retention.erasure import reverify_receipt
from retention.models import DeletionReceipt, ReceiptChain
from tests.export.support import exported
from tests.receipts.support import FUZZ, STORABLE, api_report, chain_of, forget_some, run_script, run_verify
from tests.support import client_for, make_agent


def failures(reason: str) -> float:
    return REGISTRY.get_sample_value("gam_verification_failures_total", {"check": "chain", "operation": reason}) or 0.0


# --- the chain as written ---------------------------------------------------------------------------
def test_receipts_form_a_signed_chain_per_workspace(world, agent, four):
    other = forget_some(make_agent(world.outsider), 2, tag="globex")
    assert [r.chain_seq for r in four] == [1, 2, 3, 4] and [r.chain_seq for r in other] == [1, 2]
    assert four[0].previous_hash == chain.ZERO_HASH == other[0].previous_hash
    for older, newer in zip(four, four[1:]):
        assert newer.previous_hash == older.sha256
    for receipt in four:
        stored = DeletionReceipt.objects.get(pk=receipt.pk)  # what the database gives back hashes the same
        assert chain.digest_of(stored).hex() == stored.sha256 == receipt.sha256
        assert (
            stored.key_id == receipt_keys.key_id(receipt_keys.signing_key().public_key())
            and len(stored.signature) == 128
        )
    head = ReceiptChain.objects.get(workspace_ref=world.workspace.pk)
    assert (head.seq, head.head_hash, head.head_receipt_ref) == (4, four[-1].sha256, four[-1].pk)
    status, report = run_verify()
    assert status == 0 and report["intact"] is True
    assert chain_of(report, world.workspace) == {
        "workspaceId": str(world.workspace.pk),
        "intact": True,
        "receipts": 4,
        "checked": 4,
        "headSeq": 4,
        "firstBreak": None,
        "unprovenVerifications": 0,
    }
    out = StringIO()
    call_command("verify_receipts", "--workspace", str(world.workspace.pk), stdout=out)
    assert (
        f"workspace {world.workspace.pk}: 4 receipts, chain intact" in out.getvalue()
        and "All chains intact." in out.getvalue()
    )


def test_reverifications_do_not_break_the_chain(world, four):
    # An UPDATE of a result is reported, though: tests/receipts/test_verifications.py.
    for receipt in four:
        reverify_receipt(receipt, actor=None, reason="periodic check")
    assert run_verify()[0] == 0
    assert api_report(world.owner)["intact"] is True


def test_a_deleted_user_account_does_not_break_the_chain(world, four):
    DeletionReceipt.objects.filter(pk__in=[r.pk for r in four]).update(actor=world.owner.user)
    DeletionReceipt.objects.filter(pk__in=[r.pk for r in four]).update(actor=None)
    assert run_verify()[0] == 0


# --- tampering, as someone with database access --------------------------------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        {"manifest": {"artifacts": {"memory_version": 0}, "filters": {}, "requestedIds": 0}},
        {"member_ref": 999_999},
        {"actor_label": "nobody"},
        {"memory_version_ids": [1, 2, 3]},
    ],
    ids=lambda change: next(iter(change)),
)
def test_an_edited_receipt_is_reported_exactly(world, four, change):
    target = four[2]
    DeletionReceipt.objects.filter(pk=target.pk).update(**change)
    before = failures(chain.HASH_MISMATCH)
    status, report = run_verify("--workspace", str(world.workspace.pk))
    assert status == 1 and report["intact"] is False
    assert chain_of(report, world.workspace)["firstBreak"] == {
        "receiptId": str(target.pk),
        "chainSeq": target.chain_seq,
        "reason": "hash_mismatch",
    }
    assert failures(chain.HASH_MISMATCH) == before + 1
    body = api_report(world.owner)
    assert (
        body["scope"] == "workspace" and body["intact"] is False and body["firstBreak"]["receiptId"] == str(target.pk)
    )
    assert body["firstBreak"]["reason"] == "hash_mismatch"


def test_a_moved_purge_time_is_reported(world, four):
    DeletionReceipt.objects.filter(pk=four[1].pk).update(purged_at=four[1].purged_at - timedelta(days=30))
    status, report = run_verify()
    assert status == 1 and chain_of(report, world.workspace)["firstBreak"] == {
        "receiptId": str(four[1].pk),
        "chainSeq": 2,
        "reason": "hash_mismatch",
    }
    out = StringIO()
    with pytest.raises(CommandError) as raised, translation.override("ja"):
        call_command("verify_receipts", stdout=out)
    assert raised.value.returncode == 1
    # the operator's report names the reason and says it in English (the page translates the same label)
    assert (
        f"BROKEN at receipt #{four[1].pk} (position 2): hash_mismatch: a receipt was changed after it was written "
        "(hash mismatch)" in out.getvalue()
    )


EDITS = st.one_of(
    st.tuples(st.just("actor_label"), st.text(STORABLE, min_size=1, max_size=40)),
    st.tuples(st.just("operation"), st.sampled_from(["expiry", "admin_erase", "member_delete", "x"])),
    st.tuples(
        st.just("residual"),
        st.dictionaries(st.text(STORABLE, min_size=1, max_size=8), st.integers(-5, 10**6), max_size=3),
    ),
    st.tuples(
        st.just("manifest"),
        st.fixed_dictionaries(
            {
                "artifacts": st.dictionaries(
                    st.sampled_from(["memory_version", "citation", "memory_embedding"]),
                    st.integers(0, 10**6),
                    min_size=1,
                )
            }
        ),
    ),
    st.tuples(st.just("requested_at"), st.integers(1, 10**7).map(lambda s: timedelta(seconds=s))),
    st.tuples(st.just("dedupe_key"), st.text(alphabet="abcdef0123456789:", min_size=1, max_size=30)),
)


@FUZZ
@given(position=st.integers(0, 3), edit=EDITS)
def test_generated_edits_are_reported_at_the_edited_receipt(world, four, position, edit):
    target = DeletionReceipt.objects.get(pk=four[position].pk)
    field, value = edit
    if field == "requested_at":
        value = target.requested_at - value
    if getattr(target, field) == value:
        return  # not an edit
    try:
        DeletionReceipt.objects.filter(pk=target.pk).update(**{field: value})
        report = chain.verify_chain(world.workspace.pk)
        assert report["firstBreak"] == {
            "receiptId": str(target.pk),
            "chainSeq": position + 1,
            "reason": "hash_mismatch",
        }
    finally:
        DeletionReceipt.objects.filter(pk=target.pk).update(**{field: getattr(target, field)})
    assert chain.verify_chain(world.workspace.pk)["intact"] is True


def test_a_receipt_deleted_from_the_middle_breaks_the_next_link(world, four):
    DeletionReceipt.objects.filter(pk=four[1].pk).delete()
    status, report = run_verify()
    assert status == 1 and chain_of(report, world.workspace)["firstBreak"] == {
        "receiptId": str(four[2].pk),
        "chainSeq": 3,
        "reason": "broken_link",
    }
    assert api_report(world.owner)["firstBreak"]["receiptId"] == str(four[2].pk)


def test_a_receipt_moved_in_the_chain_leaves_a_gap_where_it_was(world, four):
    DeletionReceipt.objects.filter(pk=four[1].pk).update(chain_seq=9)
    assert chain.verify_chain(world.workspace.pk)["firstBreak"] == {
        "receiptId": str(four[2].pk),
        "chainSeq": 3,
        "reason": "broken_link",
    }


def test_the_newest_receipt_deleted_is_reported_missing(world, four):
    DeletionReceipt.objects.filter(pk=four[3].pk).delete()
    status, report = run_verify()
    assert status == 1 and chain_of(report, world.workspace)["firstBreak"] == {
        "receiptId": str(four[3].pk),
        "chainSeq": 4,
        "reason": "missing_receipt",
    }


def test_a_forged_hash_still_fails_on_the_signature(world, four):
    """Someone who edits a receipt and recomputes its hash cannot sign it."""
    target = DeletionReceipt.objects.get(pk=four[0].pk)
    target.actor_label = "somebody else"
    forged = chain.digest_of(target).hex()
    DeletionReceipt.objects.filter(pk=target.pk).update(actor_label="somebody else", sha256=forged)
    assert chain.verify_chain(world.workspace.pk)["firstBreak"] == {
        "receiptId": str(target.pk),
        "chainSeq": 1,
        "reason": "bad_signature",
    }


def test_a_receipt_resigned_with_another_key_is_reported(world, four):
    target = DeletionReceipt.objects.get(pk=four[2].pk)
    intruder = Ed25519PrivateKey.generate()
    forged = intruder.sign(chain.digest_of(target)).hex()
    DeletionReceipt.objects.filter(pk=target.pk).update(signature=forged)  # claims the real key
    assert chain.verify_chain(world.workspace.pk)["firstBreak"] == {
        "receiptId": str(target.pk),
        "chainSeq": 3,
        "reason": "bad_signature",
    }
    DeletionReceipt.objects.filter(pk=target.pk).update(
        key_id=receipt_keys.key_id(intruder.public_key())
    )  # names its own key
    status, report = run_verify()
    assert status == 1 and chain_of(report, world.workspace)["firstBreak"] == {
        "receiptId": str(target.pk),
        "chainSeq": 3,
        "reason": "unknown_key",
    }


def test_a_bounded_check_verifies_the_newest_receipts_from_an_anchor(world, four):
    bounded = chain.verify_chain(world.workspace.pk, newest=2)
    assert bounded == {
        "workspaceId": str(world.workspace.pk),
        "intact": True,
        "receipts": 4,
        "checked": 2,
        "headSeq": 4,
        "firstBreak": None,
        "unprovenVerifications": 0,
        "checkedFromSeq": 3,
    }
    DeletionReceipt.objects.filter(pk=four[3].pk).update(actor_label="x")
    assert chain.verify_chain(world.workspace.pk, newest=2)["firstBreak"] == {
        "receiptId": str(four[3].pk),
        "chainSeq": 4,
        "reason": "hash_mismatch",
    }
    DeletionReceipt.objects.filter(pk=four[3].pk).update(actor_label=four[3].actor_label)
    DeletionReceipt.objects.filter(pk=four[0].pk).update(
        actor_label="x"
    )  # older than the window: only the full check sees it
    assert chain.verify_chain(world.workspace.pk, newest=2)["intact"] is True
    assert chain.verify_chain(world.workspace.pk)["firstBreak"]["receiptId"] == str(four[0].pk)


# --- keys -------------------------------------------------------------------------------------------------------
def raw_b64(key: Ed25519PrivateKey) -> str:
    from cryptography.hazmat.primitives import serialization

    return base64.b64encode(
        key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
    ).decode()


def test_rotation_keeps_old_receipts_verifiable_while_their_key_is_listed(world, agent, settings):
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    settings.RECEIPT_SIGNING_KEY = raw_b64(old)
    first = forget_some(agent, 2, tag="before")
    old_public = client_for(world.owner).get("/.well-known/receipt-signing-key").json()["keys"][0]["publicKey"]
    settings.RECEIPT_SIGNING_KEY = raw_b64(new)
    settings.RECEIPT_VERIFY_KEYS = [old_public]
    second = forget_some(agent, 2, tag="after")
    assert {r.key_id for r in first} == {receipt_keys.key_id(old.public_key())} and {r.key_id for r in second} == {
        receipt_keys.key_id(new.public_key())
    }
    assert chain.verify_chain(world.workspace.pk)["intact"] is True
    published = Client().get("/.well-known/receipt-signing-key").json()
    assert [(k["keyId"], k["current"]) for k in published["keys"]] == [
        (receipt_keys.key_id(new.public_key()), True),
        (receipt_keys.key_id(old.public_key()), False),
    ]
    settings.RECEIPT_VERIFY_KEYS = []
    assert chain.verify_chain(world.workspace.pk)["firstBreak"] == {
        "receiptId": str(first[0].pk),
        "chainSeq": 1,
        "reason": "unknown_key",
    }


def test_a_pem_signing_key_is_accepted(world, agent, settings):
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    settings.RECEIPT_SIGNING_KEY = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    (receipt,) = forget_some(agent, 1)
    assert receipt.key_id == receipt_keys.key_id(key.public_key()) and chain.verify_chain(world.workspace.pk)["intact"]


def test_the_public_key_url_needs_no_account_and_matches_the_signatures(world, four):
    response = Client().get("/.well-known/receipt-signing-key")
    assert response.status_code == 200
    body = response.json()
    (key,) = body["keys"]
    assert (
        body["algorithm"] == "Ed25519"
        and body["currentKeyId"] == key["keyId"] == four[0].key_id
        and key["current"] is True
    )
    assert key["publicKeyPem"].startswith("-----BEGIN PUBLIC KEY-----")
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(key["publicKey"]))
    public.verify(bytes.fromhex(four[0].signature), bytes.fromhex(four[0].sha256))


# --- who sees what -------------------------------------------------------------------------------------------------
def test_owner_and_member_receipts_show_the_proof(world, agent, four):
    for member in (world.owner, world.editor):
        (shown, *_) = (
            client_for(member).get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts").json()["receipts"]
        )
        newest = four[-1]
        assert shown["id"] == str(newest.pk)
        assert shown["proof"] == {
            "chainSeq": 4,
            "sha256": newest.sha256,
            "previousHash": newest.previous_hash,
            "keyId": newest.key_id,
            "signature": newest.signature,
            "proofFormat": 2,
            "verifications": newest.verifications,
            "redaction": None,  # written since names are sealed: nothing to bind (docs/receipts.md "Names in receipts")
        }
    owner_view = (
        client_for(world.owner).get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts").json()["receipts"][0]
    )
    assert "filters" not in owner_view["manifest"] and "memoryVersionIds" not in owner_view


def test_a_member_sees_the_break_only_where_it_is_their_own_receipt(world, agent, four):
    owners = forget_some(make_agent(world.owner), 1, tag="owner")
    clean = api_report(world.editor)
    assert {k: clean[k] for k in ("scope", "intact", "receipts", "firstBreak")} == {
        "scope": "member",
        "intact": True,
        "receipts": 4,
        "firstBreak": None,
    }
    assert "headSeq" not in clean and "checked" not in clean  # the workspace's total is the owner's to see
    assert clean["workspaceId"] == str(world.workspace.pk)
    assert clean["complete"] is True and "note" in clean and clean["note"] is None  # the bounded check reached the head
    DeletionReceipt.objects.filter(pk=owners[0].pk).update(actor_label="x")
    mine = api_report(world.editor)
    assert mine["intact"] is False and mine["receipts"] == 4
    assert mine["firstBreak"] == {"receiptId": None, "chainSeq": None, "reason": "hash_mismatch", "own": False}
    DeletionReceipt.objects.filter(pk=four[1].pk).update(actor_label="y")
    assert api_report(world.editor)["firstBreak"] == {
        "receiptId": str(four[1].pk),
        "chainSeq": 2,
        "reason": "hash_mismatch",
        "own": True,
    }
    assert api_report(world.viewer)["firstBreak"]["receiptId"] is None


def test_outsiders_get_no_report(world, four):
    assert (
        client_for(world.outsider).get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts/verify").status_code
        == 404
    )
    assert Client().get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts/verify").status_code in (401, 403)


# --- offline, with the documented script ---------------------------------------------------------------------------


def test_the_documented_script_verifies_an_export_offline_and_catches_tampering(world, agent, tmp_path):
    forget_some(agent, 3, tag="nihongo 日本語")
    forget_some(make_agent(world.owner), 1, tag="owner")  # another member's receipt sits in the chain
    forget_some(agent, 1, tag="later")
    document = exported(world.editor)
    assert [r["chainSeq"] for r in document["receipts"]] and all(
        set(chain.PROOF_FIELDS) <= set(r) for r in document["receipts"]
    )
    keys = Client().get("/.well-known/receipt-signing-key").json()
    result = run_script(tmp_path, document, keys)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(": ok") == 4
    tampered = json.loads(json.dumps(document))
    victim = tampered["receipts"][1]
    victim["manifest"]["artifacts"]["memory_version"] += 1
    result = run_script(tmp_path, tampered, keys)
    assert (
        result.returncode == 1
        and f"receipt {victim['id']} (chain position {victim['chainSeq']}): hash mismatch" in result.stdout
    )
    resigned = json.loads(json.dumps(document))
    resigned["receipts"][0]["signature"] = (
        Ed25519PrivateKey.generate().sign(bytes.fromhex(resigned["receipts"][0]["sha256"])).hex()
    )
    result = run_script(tmp_path, resigned, keys)
    assert result.returncode == 1 and "bad signature" in result.stdout


def test_non_ascii_filters_are_hashed_as_written_and_verify_offline(world, agent, tmp_path):
    # The canonical form keeps non-ASCII characters as UTF-8 (ensure_ascii=False, docs/receipts.md):
    # a member who forgets by a Japanese namespace and key gets a receipt the offline script,
    # which follows the document and nothing else, verifies.
    memory = agent.remember(namespace="日記", key="メモ", text="週末は京都へ行く").json()["memory"]
    forgotten = agent.forget(namespace="日記", key="メモ")
    assert forgotten.status_code == 200, forgotten.content
    receipt = DeletionReceipt.objects.get(pk=forgotten.json()["receiptId"])
    digester = receipt_names.Digester(receipt_names.name_key(world.workspace.pk, world.editor.pk, create=False))
    assert (
        receipt.manifest["filters"]
        == {"namespaceHmac": digester.digest("namespace", "日記"), "keyHmac": digester.digest("key", "日記", "メモ")}
        and memory["id"]
    )
    assert (
        receipt.manifest["filters"]["keyHmac"]
        == hmac.new(
            receipt_names._subkey(digester_key(world), "key"),
            json.dumps(["日記", "メモ"], ensure_ascii=False).encode(),
            hashlib.sha256,
        ).hexdigest()
    )  # UTF-8, as documented
    documented = json.dumps(
        chain.canonical_fields(receipt), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")
    assert hashlib.sha256(documented).hexdigest() == receipt.sha256
    result = run_script(tmp_path, exported(world.editor), Client().get("/.well-known/receipt-signing-key").json())
    assert result.returncode == 0 and result.stdout.count(": ok") == 1, result.stdout + result.stderr


def digester_key(world) -> bytes:
    return receipt_names.name_key(world.workspace.pk, world.editor.pk, create=False)


def test_a_receipt_about_several_members_names_none(world, agent):
    # docs/receipts.md: memberRef is the member id as a string, or null when the receipt covers
    # several members (a cascade or sweep erasing memories of more than one) — never "None".
    from memoryapp.models import MemoryVersion
    from retention.erasure import erase_memories
    from retention.models import Operation

    make_agent(world.owner).remember(namespace="n", text="the owner's own note")
    agent.remember(namespace="n", text="a note of the editor")
    ids = list(MemoryVersion.objects.filter(member__workspace=world.workspace).values_list("pk", flat=True))
    several = erase_memories(
        ids, operation=Operation.CASCADE_DOCUMENT, workspace_id=world.workspace.pk, actor_label="system: test"
    )
    assert several.member_ref is None and chain.canonical_fields(several)["memberRef"] is None
    (own,) = forget_some(agent, 1)
    assert chain.canonical_fields(own)["memberRef"] == str(world.editor.pk)
    assert chain.verify_chain(world.workspace.pk)["intact"] is True


# --- the data migration -----------------------------------------------------------------------------------------------
def test_the_migration_seals_existing_receipts_in_the_order_they_were_written(world, agent):
    made = forget_some(agent, 3) + forget_some(make_agent(world.outsider), 2, tag="globex")
    # As before the chain (the unique position constraint comes after the migration: positions stay distinct here)
    DeletionReceipt.objects.update(chain_seq=F("id") + 1000, previous_hash="", sha256="", key_id="", signature="")
    ReceiptChain.objects.all().delete()
    assert chain.verify_chain(world.workspace.pk)["intact"] is False
    importlib.import_module("retention.migrations.0004_seal_existing_receipts").seal_existing(apps, None)
    importlib.import_module("retention.migrations.0013_receipt_verification_anchors").anchor_existing(
        apps, None
    )  # signs the heads 0004 wrote
    sealed = {r.pk: r for r in DeletionReceipt.objects.all()}
    assert [sealed[r.pk].chain_seq for r in made] == [1, 2, 3, 1, 2]
    status, report = run_verify()
    assert status == 0 and report["intact"]
    assert ReceiptChain.objects.get(workspace_ref=world.workspace.pk).head_receipt_ref == made[2].pk


# --- the page ---------------------------------------------------------------------------------------------------------
def test_the_owner_page_says_whether_the_chain_is_intact_in_both_languages(world, four):
    client = Client()
    client.force_login(world.owner.user)
    page = client.get(f"/w/{world.workspace.pk}/settings/ask-history/", HTTP_ACCEPT_LANGUAGE="en")
    assert page.status_code == 200
    assert "Verified: chain intact" in page.content.decode()
    DeletionReceipt.objects.filter(pk=four[1].pk).update(actor_label="tampered")
    text = client.get(f"/w/{world.workspace.pk}/settings/ask-history/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert f"Chain broken at receipt #{four[1].pk} (position 2)" in text and "hash mismatch" in text
    text = client.get(f"/w/{world.workspace.pk}/settings/ask-history/", HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert f"削除証明 #{four[1].pk}（位置 2）でチェーンが壊れています" in text


def test_the_page_checks_the_newest_receipts_and_says_so(world, four, monkeypatch):
    from memoryapp.pages import presenters

    monkeypatch.setattr(presenters, "PAGE_CHAIN_CHECK", 3)
    client = Client()
    client.force_login(world.owner.user)
    text = client.get(f"/w/{world.workspace.pk}/settings/ask-history/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Verified: chain intact" in text and "The newest 3 were checked here" in text
    text = client.get(f"/w/{world.workspace.pk}/settings/ask-history/", HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "ここでは最新の 3 件を検証しました" in text


# --- the proof is no oracle for what the member chose
# ------------------------------------------------------------------
@FUZZ
@given(secret=st.from_regex(r"[a-z]{3,10}_[a-z]{3,10}", fullmatch=True))
def test_the_owner_cannot_confirm_a_guessed_key_or_id_from_a_members_proof(world, agent, secret):
    """A member's receipt hashes the key they forgot and the version ids. The owner sees every
    other hashed field and the hash itself, so without a secret in the hash the owner could try
    guesses (a short list of keys, a small range of ids) offline until one hashed to the proof:
    the proof would tell them what SPEC §5 says only the member sees."""
    agent.remember(namespace="health", key=secret, text="something private")
    response = agent.forget(namespace="health", key=secret)
    assert response.status_code == 200, response.content
    stored = DeletionReceipt.objects.get(pk=response.json()["receiptId"])
    (shown,) = [
        r
        for r in client_for(world.owner)
        .get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts")
        .json()["receipts"]
        if r["id"] == str(stored.pk)
    ]
    assert "filters" not in shown["manifest"] and "memoryVersionIds" not in shown and "salt" not in shown
    known = {
        "chainSeq": shown["proof"]["chainSeq"],
        "previousHash": shown["proof"]["previousHash"],
        "workspaceRef": str(world.workspace.pk),
        "memberRef": shown["memberId"],
        "operation": shown["operation"],
        "actorLabel": shown["actor"],
        "requestedAt": shown["requestedAt"],
        "unreachableAt": shown["unreachableAt"],
        "purgedAt": shown["purgedAt"],
        "residual": shown["residual"],
        "dedupeKey": None,
        "proofFormat": shown["proof"]["proofFormat"],
    }
    top = max(DeletionReceipt.objects.values_list("memory_version_ids", flat=True).last() or [0]) + 5
    for guess in (secret, secret + "x", "note"):  # the owner's guess list holds the right key
        manifest = {
            "artifacts": shown["manifest"]["artifacts"],
            "filters": {"namespace": "health", "key": guess},
            "requestedIds": shown["manifest"]["requestedIds"],
        }
        for pk in range(1, top):
            fields = {**known, "manifest": manifest, "memoryVersionIds": [str(pk)]}
            digest = hashlib.sha256(
                json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            ).hexdigest()
            assert digest != shown["proof"]["sha256"], f"the proof confirmed the guess {guess!r}"
    (own,) = [
        r
        for r in client_for(world.editor)
        .get(f"/api/w/{world.workspace.pk}/ask-history/deletion-receipts")
        .json()["receipts"]
        if r["id"] == str(stored.pk)
    ]
    assert len(own["salt"]) == 32 and own["salt"] == stored.salt  # the member, and only the member, can recompute it
    fields = {**known, "manifest": own["manifest"], "memoryVersionIds": own["memoryVersionIds"], "salt": own["salt"]}
    assert (
        hashlib.sha256(
            json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        ).hexdigest()
        == shown["proof"]["sha256"]
    )
