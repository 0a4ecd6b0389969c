"""Receipts anyone can verify: each workspace's deletion receipts form a hash chain, every link
signed with Ed25519 (docs/receipts.md).

A receipt's hash is the SHA-256 of its canonical JSON (docs/receipts.md "The canonical form"): the
fields that never change after writing, plus a random `salt` shown only to its member, so the owner
cannot confirm a guessed key or memory id offline. Verification results are proven by signed
records appended to the receipt, and the chain head's signed anchor pins each re-verified receipt's
record count and newest hash, so dropping a record or rolling back the shown result is reported
("Verification records"). Names are kept only as keyed digests ("Names in receipts").

`append` is the one way a receipt is written: it locks the workspace's chain head row, so erases in
one workspace serialise on it, and a (workspace, position) unique constraint makes a fork impossible
even past the lock. `verify_chain` recomputes every hash, link and signature and reports the first
break. Keys: `receipt_keys`; bounded and whole-chain checks: `receipt_checks`; who sees which
receipt: `receipt_access`.

Over ~400 lines on purpose: what is left is the chain's format — canonical form, verification
records, anchors, appending, the full verify — which changes as one."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.timestamps import iso
from memoryapp import metrics
from retention import receipt_names
from retention.models import DeletionReceipt, ReceiptChain
from retention.receipt_keys import key_id, public_keys, signing_key

ZERO_HASH = "0" * 64
CANONICAL_FIELDS = (
    "chainSeq",
    "previousHash",
    "workspaceRef",
    "memberRef",
    "operation",
    "actorLabel",
    "manifest",
    "memoryVersionIds",
    "requestedAt",
    "unreachableAt",
    "purgedAt",
    "residual",
    "dedupeKey",
)
SALT_FIELD = "salt"  # hashed too when the receipt has one (every receipt appended since it exists)
FORMAT_FIELD = "proofFormat"  # hashed too from proof format 2 on (verifications sealed as records)
OPTIONAL_FIELDS = (SALT_FIELD, FORMAT_FIELD)
PROOF_FORMAT = 2
VERIFICATION_FIELDS = ("seq", "trigger", "previousHash", "verification")  # a record's hashed keys
RECEIPT_TRIGGER = "receipt"  # the result the erase wrote with its receipt
REVERIFICATION_TRIGGER = "reverification"
PROOF_FIELDS = ("chainSeq", "sha256", "previousHash", "keyId", "signature", "proofFormat", "verifications", "redaction")
REDACTION_FORMAT = "receipt-names/v1"  # what a redaction record's signature is over (`redaction_digest`)

# Why a chain breaks, in the order the checks run on each receipt.
HASH_MISMATCH = "hash_mismatch"  # the stored fields no longer hash to the stored hash
BROKEN_LINK = "broken_link"  # previousHash/position do not follow the receipt before it
UNKNOWN_KEY = "unknown_key"  # signed by a key that is neither current nor listed as retired
BAD_SIGNATURE = "bad_signature"  # the signature does not verify with the named key
MISSING_RECEIPT = "missing_receipt"  # the chain's head names a later receipt that is gone
# A verification record that no longer hashes to its hash, is out of place (removed, reordered,
# copied from another receipt), or a shown result that is not the newest record's. A record's
# signature failing reports UNKNOWN_KEY / BAD_SIGNATURE, with its `verificationSeq`.
VERIFICATION_CHANGED = "verification_changed"
# The chain head's signed verification anchor (each re-verified receipt's record count and newest
# record hash) does not verify: edited, cleared or moved from another workspace.
ANCHOR_CHANGED = "anchor_changed"
REASONS = (
    HASH_MISMATCH,
    BROKEN_LINK,
    UNKNOWN_KEY,
    BAD_SIGNATURE,
    VERIFICATION_CHANGED,
    ANCHOR_CHANGED,
    MISSING_RECEIPT,
)
#: What each break means, for people: the receipts page (translated) and `verify_receipts` (English).
REASON_LABELS = {
    HASH_MISMATCH: gettext_lazy("a receipt was changed after it was written (hash mismatch)"),
    BROKEN_LINK: gettext_lazy("a receipt before it was removed or reordered (broken link)"),
    UNKNOWN_KEY: gettext_lazy("signed by an unknown key"),
    BAD_SIGNATURE: gettext_lazy("the signature does not verify (bad signature)"),
    VERIFICATION_CHANGED: gettext_lazy("its verification result was changed after it was written"),
    ANCHOR_CHANGED: gettext_lazy("the record of its re-verifications was changed"),
    MISSING_RECEIPT: gettext_lazy("the newest receipt is missing"),
}


# --- the canonical form -------------------------------------------------------------------------------
def _instant(value: datetime) -> str | None:
    return iso(value.astimezone(UTC)) if value is not None else None


def _stored_json(value: Any) -> Any:
    """What the JSON column gives back once written (tuples become lists, keys strings)."""
    return json.loads(json.dumps(value))


def canonical_fields(receipt: Any) -> dict[str, Any]:
    """The hashed fields of a receipt (a model instance, historical ones included), named and
    written as the member's export writes them."""
    return {
        "chainSeq": int(receipt.chain_seq),
        "previousHash": receipt.previous_hash,
        "workspaceRef": str(receipt.workspace_ref),
        "memberRef": str(receipt.member_ref) if receipt.member_ref is not None else None,
        "operation": receipt.operation,
        "actorLabel": receipt.actor_label,
        "manifest": _stored_json(receipt.manifest),
        "memoryVersionIds": [str(i) for i in receipt.memory_version_ids or []],
        "requestedAt": _instant(receipt.requested_at),
        "unreachableAt": _instant(receipt.unreachable_at),
        "purgedAt": _instant(receipt.purged_at),
        "residual": _stored_json(receipt.residual),
        "dedupeKey": receipt.dedupe_key,
        **({SALT_FIELD: receipt.salt} if getattr(receipt, "salt", "") else {}),
        **({FORMAT_FIELD: proof_format} if (proof_format := proof_format_of(receipt)) >= 2 else {}),
    }


def proof_format_of(receipt: Any) -> int:
    """1 for receipts sealed before verifications were records (and historical models without
    the field, in the migrations that seal them)."""
    return int(getattr(receipt, "proof_format", 1) or 1)


def _canonical_json(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def canonical(fields: dict[str, Any]) -> bytes:
    names = CANONICAL_FIELDS + tuple(name for name in OPTIONAL_FIELDS if fields.get(name))
    return _canonical_json({name: fields[name] for name in names})


def digest_of(receipt: Any) -> bytes:
    return hashlib.sha256(canonical(canonical_fields(receipt))).digest()


def redaction_digest(workspace_ref: Any, chain_seq: int, sha256: str, redacted: str) -> bytes:
    """What a redaction record signs: the receipt (workspace, position), the hash it was signed
    with and the hash its fields have since its names were sealed."""
    return hashlib.sha256(
        _canonical_json(
            {
                "redaction": REDACTION_FORMAT,
                "workspaceRef": str(workspace_ref),
                "chainSeq": int(chain_seq),
                "sha256": sha256,
                "redactedSha256": redacted,
            }
        )
    ).digest()


def redact(receipt: Any, manifest: dict[str, Any], key: Ed25519PrivateKey | None = None) -> None:
    """Give a sealed receipt `manifest` (its names sealed) and the signed record that binds the
    hash its fields now have to the one it was signed with. The caller checks first that the
    receipt hashes to its hash (migration 0014 leaves a broken one unattested)."""
    key = key or signing_key()
    receipt.manifest = manifest
    redacted = digest_of(receipt).hex()
    signature = key.sign(redaction_digest(receipt.workspace_ref, receipt.chain_seq, receipt.sha256, redacted)).hex()
    receipt.redaction = {"redactedSha256": redacted, "keyId": key_id(key.public_key()), "signature": signature}


def signed_digest(receipt: Any, keys: dict[str, Ed25519PublicKey]) -> tuple[bytes | None, str | None]:
    """(the digest the receipt's signature covers, why that cannot be trusted): its fields'
    digest; for a redacted receipt the `sha256` it was signed with, once its fields hash to the
    record's `redactedSha256` (else HASH_MISMATCH) and the record's signature verifies (else
    UNKNOWN_KEY / BAD_SIGNATURE)."""
    digest = digest_of(receipt)
    redaction = getattr(receipt, "redaction", None)
    if redaction is None:
        return digest, (None if digest.hex() == receipt.sha256 else HASH_MISMATCH)
    try:
        if digest.hex() != redaction["redactedSha256"]:
            return None, HASH_MISMATCH
        signed = bytes.fromhex(receipt.sha256)
    except (KeyError, TypeError, ValueError):
        return None, HASH_MISMATCH
    return signed, _signature_problem(
        keys,
        redaction.get("keyId"),
        redaction.get("signature"),
        redaction_digest(receipt.workspace_ref, receipt.chain_seq, receipt.sha256, redaction["redactedSha256"]),
    )


def verification_digest(record: dict[str, Any]) -> bytes:
    """SHA-256 of a verification record's canonical JSON (its four hashed keys)."""
    return hashlib.sha256(_canonical_json({name: record[name] for name in VERIFICATION_FIELDS})).digest()


def seal(receipt: Any, key: Ed25519PrivateKey | None = None) -> None:
    """Set the receipt's hash, key id and signature from its position, link and fields."""
    key = key or signing_key()
    digest = digest_of(receipt)
    receipt.sha256 = digest.hex()
    receipt.key_id = key_id(key.public_key())
    receipt.signature = key.sign(digest).hex()


def add_verification(
    receipt: DeletionReceipt, verification: dict[str, Any], *, trigger: str, key: Ed25519PrivateKey | None = None
) -> dict[str, Any]:
    """Append a sealed record of this result to the receipt (sealed already: the first record
    links to its hash) and show it as the receipt's result. The caller saves both fields, under
    the receipt's row lock when the receipt exists (two re-verifications at once must not both
    append position n), in the same transaction: a record added to a stored receipt is anchored
    in the workspace's chain head here (`anchor`), so dropping it later is reported."""
    key = key or signing_key()
    records = list(receipt.verifications) if isinstance(receipt.verifications, list) else []
    last = records[-1] if records and isinstance(records[-1], dict) else {}
    previous = last.get("sha256", "") if records else receipt.sha256  # a tampered list stays reported as such
    record = {
        "seq": len(records) + 1,
        "trigger": trigger,
        "previousHash": previous,
        "verification": _stored_json(verification),
    }
    digest = verification_digest(record)
    record.update(sha256=digest.hex(), keyId=key_id(key.public_key()), signature=key.sign(digest).hex())
    receipt.verifications = [*records, record]
    receipt.verification = record["verification"]
    if receipt.pk is not None:
        anchor(receipt, key)
    return record


# --- the verification anchor --------------------------------------------------------------------------
def anchors_digest(workspace_ref: int, anchors: dict[str, Any]) -> bytes:
    return hashlib.sha256(
        _canonical_json(
            {"anchors": "receipt-verifications/v1", "workspaceRef": str(workspace_ref), "receipts": anchors}
        )
    ).digest()


def signed_anchors(workspace_ref: int, anchors: dict[str, Any], key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """The chain head's anchor fields for this map (chain position -> [count, newest hash]), signed."""
    key = key or signing_key()
    return {
        "verification_anchors": anchors,
        "anchors_key_id": key_id(key.public_key()),
        "anchors_signature": key.sign(anchors_digest(workspace_ref, anchors)).hex(),
    }


def anchor(receipt: DeletionReceipt, key: Ed25519PrivateKey | None = None) -> None:
    """Record the receipt's record count and newest record hash in its workspace's chain head,
    re-signed, under the head's row lock (two re-verifications at once keep both)."""
    head_id, _seq, _hash = lock_head(int(receipt.workspace_ref))
    current = ReceiptChain.objects.filter(pk=head_id).values_list("verification_anchors", flat=True).first()
    anchors = dict(current) if isinstance(current, dict) else {}
    anchors[str(receipt.chain_seq)] = [len(receipt.verifications), receipt.verifications[-1]["sha256"]]
    ReceiptChain.objects.filter(pk=head_id).update(**signed_anchors(int(receipt.workspace_ref), anchors, key))


def head_anchors(
    head: ReceiptChain | None, keys: dict[str, Ed25519PublicKey]
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the anchor map, a break if its signature does not verify). A head holding receipts must
    carry a signed map (an empty one from its first receipt on, the migration for older heads),
    so clearing it is reported too. No head: nothing anchored (the walk still requires every
    re-verified receipt to be anchored)."""
    if head is None:
        return {}, None
    anchors = head.verification_anchors if head.verification_anchors is not None else {}
    if head.seq == 0 and not anchors and not head.anchors_signature:
        return {}, None
    problem = not isinstance(anchors, dict) or _signature_problem(
        keys, head.anchors_key_id, head.anchors_signature, anchors_digest(head.workspace_ref, anchors)
    )
    if problem:
        return (anchors if isinstance(anchors, dict) else {}), {
            "receiptId": None,
            "chainSeq": None,
            "reason": ANCHOR_CHANGED,
        }
    return anchors, None


def anchor_problem(receipt: DeletionReceipt, anchors: dict[str, Any]) -> tuple[str, int | None] | None:
    """A re-verified receipt's records must end where the head's anchor says (count, newest
    hash); a receipt the anchor does not name may hold only the record written with it."""
    records = receipt.verifications if isinstance(receipt.verifications, list) else []
    entry = anchors.get(str(receipt.chain_seq))
    if entry is None:
        late = next((r for r in records if not isinstance(r, dict) or r.get("trigger") != RECEIPT_TRIGGER), None)
        return (VERIFICATION_CHANGED, late.get("seq") if isinstance(late, dict) else None) if late is not None else None
    newest = records[-1].get("sha256") if records and isinstance(records[-1], dict) else None
    if not isinstance(entry, list) or len(entry) != 2 or [len(records), newest] != entry:
        return VERIFICATION_CHANGED, entry[0] if isinstance(entry, list) and entry and isinstance(
            entry[0], int
        ) else None
    return None


def proof_json(receipt: DeletionReceipt) -> dict[str, Any]:
    """The content-free proof shown with a receipt: position, hash, link, key id, signature, and
    the sealed records of its verification results."""
    return {
        "chainSeq": receipt.chain_seq,
        "sha256": receipt.sha256,
        "previousHash": receipt.previous_hash,
        "keyId": receipt.key_id,
        "signature": receipt.signature,
        "proofFormat": receipt.proof_format,
        "verifications": receipt.verifications,
        "redaction": receipt.redaction,
    }


# --- appending ------------------------------------------------------------------------------------------
def lock_head(workspace_ref: int) -> tuple[int, int, str]:
    """(head row id, last position, last hash) of the workspace's chain, the row created if
    missing and locked until the transaction ends. PostgreSQL: one upsert that takes the row
    lock and answers the current values (a concurrent appender waits on it, then sees the
    committed head); elsewhere an insert-if-missing and SELECT … FOR UPDATE."""
    if connection.vendor == "postgresql":
        table = ReceiptChain._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (workspace_ref, seq, head_hash, updated_at) VALUES (%s, 0, %s, now()) ON "
                f"CONFLICT (workspace_ref) DO UPDATE SET seq = {table}.seq RETURNING id, seq, head_hash",
                [workspace_ref, ZERO_HASH],
            )
            return cursor.fetchone()
    ReceiptChain.objects.bulk_create([ReceiptChain(workspace_ref=workspace_ref)], ignore_conflicts=True)
    head = ReceiptChain.objects.select_for_update().get(workspace_ref=workspace_ref)
    return head.pk, head.seq, head.head_hash


def append(*, verification: dict[str, Any], **fields: Any) -> DeletionReceipt:
    """Write one receipt at the end of its workspace's chain, sealed and signed, with its
    verification result as the first sealed record."""
    fields["manifest"] = receipt_names.sealed_manifest(
        fields["manifest"], workspace_id=int(fields["workspace_ref"]), member_id=fields.get("member_ref")
    )  # before the chain's lock
    with transaction.atomic(savepoint=False):
        head_id, seq, head_hash = lock_head(int(fields["workspace_ref"]))
        receipt = DeletionReceipt(
            **fields,
            chain_seq=seq + 1,
            previous_hash=head_hash,
            salt=secrets.token_hex(16),
            proof_format=PROOF_FORMAT,
            verifications=[],
        )
        key = signing_key()
        seal(receipt, key)
        add_verification(receipt, verification, trigger=RECEIPT_TRIGGER, key=key)
        receipt.save(force_insert=True)
        first = (
            signed_anchors(receipt.workspace_ref, {}, key) if seq == 0 else {}
        )  # the head's anchor is signed from its first receipt on
        ReceiptChain.objects.filter(pk=head_id).update(
            seq=receipt.chain_seq,
            head_hash=receipt.sha256,
            head_receipt_ref=receipt.pk,
            updated_at=timezone.now(),
            **first,
        )
    return receipt


# --- verifying ----------------------------------------------------------------------------------------------
def _signature_problem(keys: dict[str, Ed25519PublicKey], kid: Any, signature: Any, digest: bytes) -> str | None:
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        return UNKNOWN_KEY
    try:
        key.verify(bytes.fromhex(signature), digest)
    except (InvalidSignature, ValueError, TypeError):
        return BAD_SIGNATURE
    return None


def check(
    receipt: DeletionReceipt, *, previous_hash: str, expected_seq: int, keys: dict[str, Ed25519PublicKey]
) -> str | None:
    """Why this receipt breaks the chain, or None (its verification records: `check_verifications`)."""
    signed, problem = signed_digest(receipt, keys)
    if problem == HASH_MISMATCH or signed is None:
        return HASH_MISMATCH
    if receipt.previous_hash != previous_hash or receipt.chain_seq != expected_seq:
        return BROKEN_LINK
    return problem or _signature_problem(keys, receipt.key_id, receipt.signature, signed)


def check_verifications(receipt: DeletionReceipt, keys: dict[str, Ed25519PublicKey]) -> tuple[str, int | None] | None:
    """Why the receipt's verification results break the chain — (reason, the record's position,
    None for the shown result) — or None. Each record must hash to its hash, sit at its position,
    link to the receipt (first) or the record before it, and verify with the key it names; the
    shown result must be the newest record's. A receipt of proof format 1 without records has a
    result nothing proves: it verifies as before (`unprovenVerifications` counts it)."""
    records = receipt.verifications
    if not records:
        return (VERIFICATION_CHANGED, None) if proof_format_of(receipt) >= 2 or not isinstance(records, list) else None
    if not isinstance(records, list):
        return VERIFICATION_CHANGED, None
    previous = receipt.sha256
    for seq, record in enumerate(records, 1):
        try:
            digest = verification_digest(record)
            in_place = record["seq"] == seq and record["previousHash"] == previous and digest.hex() == record["sha256"]
        except (KeyError, TypeError, AttributeError):
            in_place = False
        if not in_place:
            return VERIFICATION_CHANGED, seq
        problem = _signature_problem(keys, record.get("keyId"), record.get("signature"), digest)
        if problem:
            return problem, seq
        previous = record["sha256"]
    if _stored_json(receipt.verification) != records[-1]["verification"]:
        return VERIFICATION_CHANGED, None
    return None


@dataclass
class Walk:
    """What walking a run of receipts found: how many were checked, the first break, how many
    checked results no record proves, and the last receipt found intact (its position, hash)."""

    checked: int = 0
    first_break: dict[str, Any] | None = None
    unproven: int = 0
    last_seq: int = 0
    last_hash: str = ZERO_HASH


def walk(
    receipts: Iterable[DeletionReceipt],
    *,
    previous: str,
    expected: int,
    keys: dict[str, Ed25519PublicKey],
    anchored: bool = False,
    anchors: dict[str, Any] | None = None,
) -> Walk:
    """Check receipts in chain order, each linked to the one before (`previous`, `expected`: the
    hash and position the first must follow; `anchored`: the first is the anchor, its link not
    checked; `anchors`: the head's verification anchor), stopping at the first break."""
    anchors = anchors if anchors is not None else {}
    found = Walk(last_seq=expected - 1, last_hash=previous)
    for receipt in receipts:
        if anchored and found.checked == 0:
            previous, expected = receipt.previous_hash, receipt.chain_seq
        found.checked += 1
        reason = check(receipt, previous_hash=previous, expected_seq=expected, keys=keys)
        if reason:
            found.first_break = {"receiptId": str(receipt.pk), "chainSeq": receipt.chain_seq, "reason": reason}
            break
        problem = check_verifications(receipt, keys) or anchor_problem(receipt, anchors)
        if problem:
            found.first_break = {
                "receiptId": str(receipt.pk),
                "chainSeq": receipt.chain_seq,
                "reason": problem[0],
                "verificationSeq": problem[1],
            }
            break
        found.unproven += not receipt.verifications
        previous, expected = receipt.sha256, receipt.chain_seq + 1
        found.last_seq, found.last_hash = receipt.chain_seq, receipt.sha256
    return found


def _head_break(head: ReceiptChain | None, last_seq: int, last_hash: str) -> dict[str, Any] | None:
    """The chain's head names a later receipt than the last one found (the newest was removed), or
    receipts exist and their head is gone: every append writes the head, and it carries the signed
    anchors of re-verified receipts, so a deleted head row would hide a truncated verification."""
    if head is None:
        return {"receiptId": None, "chainSeq": last_seq, "reason": ANCHOR_CHANGED} if last_seq > 0 else None
    if head.seq != last_seq or head.head_hash != last_hash:
        return {
            "receiptId": str(head.head_receipt_ref) if head.head_receipt_ref is not None else None,
            "chainSeq": head.seq,
            "reason": MISSING_RECEIPT,
        }
    return None


def verify_chain(
    workspace_ref: int, *, keys: dict[str, Ed25519PublicKey] | None = None, newest: int | None = None
) -> dict[str, Any]:
    """Walk one workspace's chain from its first receipt; the report names the first break, and
    the verified checkpoint is rewritten from what was found (`save_checkpoint`).
    `newest`: check only the newest N receipts (a page's bounded check; no checkpoint written);
    the oldest of them is taken as the anchor (its hash and signature are checked, its link to
    the one before is not)."""
    keys = keys if keys is not None else public_keys()
    started = ReceiptChain.objects.filter(workspace_ref=workspace_ref).values_list("checkpoint_rev", flat=True).first()
    receipts = DeletionReceipt.objects.filter(workspace_ref=workspace_ref)
    total = receipts.count()
    ordered = receipts.order_by("chain_seq", "id")
    checked_from = 1
    if newest is not None and total > newest:
        checked_from = receipts.order_by("-chain_seq").values_list("chain_seq", flat=True)[newest - 1]
        ordered = ordered.filter(chain_seq__gte=checked_from)
    head = ReceiptChain.objects.filter(workspace_ref=workspace_ref).first()
    anchors, anchor_break = head_anchors(head, keys)
    found = walk(
        ordered.iterator(chunk_size=500),
        previous=ZERO_HASH,
        expected=1,
        keys=keys,
        anchored=checked_from > 1,
        anchors=anchors,
    )
    first_break = found.first_break or anchor_break or _head_break(head, found.last_seq, found.last_hash)
    if first_break is not None:
        metrics.verification_failed("chain", first_break["reason"])
    if checked_from == 1 and head is not None and started is not None:
        save_checkpoint(head.pk, rev=started, seq=found.last_seq, sha256=found.last_hash, full=True, sweep=1)
    report = {
        "workspaceId": str(workspace_ref),
        "intact": first_break is None,
        "receipts": total,
        "checked": found.checked,
        "headSeq": head.seq if head is not None else 0,
        "firstBreak": first_break,
        # checked receipts sealed before results were records, not re-verified since
        "unprovenVerifications": found.unproven,
    }
    if checked_from > 1:
        report["checkedFromSeq"] = checked_from
    return report


# --- the verified checkpoint on the chain head (receipt_checks reads it) ------------------------------
def checkpoint_digest(workspace_ref: int, seq: int, sha256: str) -> bytes:
    return hashlib.sha256(
        _canonical_json(
            {"checkpoint": "receipt-chain/v1", "workspaceRef": str(workspace_ref), "seq": int(seq), "sha256": sha256}
        )
    ).digest()


def checkpoint_valid(head: ReceiptChain, keys: dict[str, Ed25519PublicKey]) -> bool:
    """Whether the head's checkpoint was signed by a receipt signing key (a database edit that
    moves it is not): an invalid one counts as none."""
    if head.verified_seq == 0:
        return False
    return (
        _signature_problem(
            keys,
            head.checkpoint_key_id,
            head.checkpoint_signature,
            checkpoint_digest(head.workspace_ref, head.verified_seq, head.verified_hash),
        )
        is None
    )


def save_checkpoint(head_id: int, *, rev: int, seq: int, sha256: str, sweep: int, full: bool = False) -> bool:
    """Write the checkpoint "receipts 1 … seq are intact", signed, if nobody wrote one since
    revision `rev` was read (a conditional UPDATE: two checks at once keep one of them)."""
    key = signing_key()
    workspace_ref = ReceiptChain.objects.filter(pk=head_id).values_list("workspace_ref", flat=True).first()
    if workspace_ref is None:
        return False
    now = timezone.now()
    fields: dict[str, Any] = {
        "verified_seq": seq,
        "verified_hash": sha256,
        "checkpoint_key_id": key_id(key.public_key()),
        "checkpoint_signature": key.sign(checkpoint_digest(workspace_ref, seq, sha256)).hex() if seq else "",
        "checkpoint_rev": rev + 1,
        "sweep_seq": sweep,
        "verified_at": now,
    }
    if full:
        fields["full_check_at"] = now
    return bool(ReceiptChain.objects.filter(pk=head_id, checkpoint_rev=rev).update(**fields))
