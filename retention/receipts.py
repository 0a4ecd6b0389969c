"""Receipts anyone can verify (docs/receipts.md): each workspace's deletion receipts form a hash
chain, and every link is signed with Ed25519.

A receipt's hash is the SHA-256 of its canonical JSON: the fields that never change after it is
written, in the form the member's export writes them (ids as strings, instants as the APIs write
them), keys sorted, no spaces, UTF-8. `actor` (nulled when the user is deleted) is not part of
it, nor `verification`: that result is proven by records of its own (below). A random `salt`,
shown only to the member whose receipt it is, is hashed with them: the owner sees the hash and
every other hashed field, and without a secret in it could confirm a guessed key or memory id
offline. Each receipt stores the previous receipt's hash (64 zeros for the first), its position,
the id of the signing key and the signature of the 32 raw digest bytes.

Verification results are proven too: the erase's own result and every re-verification is a
record appended to the receipt's `verifications` — its position, what wrote it, the result, the
hash of the receipt (first record) or of the record before it, its own hash and signature — and
the result shown with the receipt must be the newest record's. Receipts of proof format 2 hash
`"proofFormat": 2`, so dropping their records cannot make them pass for a receipt sealed before
records existed (format 1: unproven results, counted as such, verified as before). A receipt's
hash cannot commit to records appended after it, so the workspace's chain head anchors every
re-verified receipt's record count and newest record hash, signed (`anchor`): dropping the newest
record and rolling the shown result back is reported too.

`append` is the one way a receipt is written: it locks the workspace's chain head row, so two
erases at once in one workspace serialise on it (PostgreSQL row lock; SQLite's IMMEDIATE
transactions serialise every writer anyway) and a (workspace, position) unique constraint makes
a fork impossible even if a caller bypassed the lock. `verify_chain` recomputes every hash, link
and signature and reports the first break."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone, translation

from core.timestamps import iso
from governance.models import Member
from memoryapp import metrics
from retention.models import DeletionReceipt, Operation, ReceiptChain

ZERO_HASH = "0" * 64
ALGORITHM = "Ed25519"
PUBLIC_KEY_PATH = "/.well-known/receipt-signing-key"
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
PROOF_FIELDS = ("chainSeq", "sha256", "previousHash", "keyId", "signature", "proofFormat", "verifications")

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
REASONS = (HASH_MISMATCH, BROKEN_LINK, UNKNOWN_KEY, BAD_SIGNATURE, VERIFICATION_CHANGED, ANCHOR_CHANGED, MISSING_RECEIPT)


# --- keys -------------------------------------------------------------------------------------------
def _decode_key(text: str, *, private: bool) -> Ed25519PrivateKey | Ed25519PublicKey:
    text = text.strip()
    kind = "RECEIPT_SIGNING_KEY" if private else "RECEIPT_VERIFY_KEYS"
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_private_key(text.encode(), password=None) if private else serialization.load_pem_public_key(text.encode())
        else:
            raw = base64.b64decode(text, validate=True)
            key = Ed25519PrivateKey.from_private_bytes(raw) if private else Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise ImproperlyConfigured(f"{kind}: not a base64 raw 32-byte Ed25519 key nor a PEM ({exc})") from None
    if not isinstance(key, Ed25519PrivateKey if private else Ed25519PublicKey):
        raise ImproperlyConfigured(f"{kind}: the PEM holds a {type(key).__name__}, not an Ed25519 key")
    return key


@lru_cache(maxsize=8)
def _private(text: str) -> Ed25519PrivateKey:
    return _decode_key(text, private=True)  # type: ignore[return-value]


@lru_cache(maxsize=32)
def _public(text: str) -> Ed25519PublicKey:
    return _decode_key(text, private=False)  # type: ignore[return-value]


def signing_key() -> Ed25519PrivateKey:
    return _private(settings.RECEIPT_SIGNING_KEY)


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """The first 16 bytes of the SHA-256 of the raw public key, as hex (32 characters)."""
    return hashlib.sha256(raw_public(key)).hexdigest()[:32]


def public_keys() -> dict[str, Ed25519PublicKey]:
    """Every key a receipt may be signed with: the current one first, then the retired ones."""
    current = signing_key().public_key()
    keys = {key_id(current): current}
    for text in settings.RECEIPT_VERIFY_KEYS:
        key = _public(text)
        keys.setdefault(key_id(key), key)
    return keys


def public_keys_json() -> dict[str, Any]:
    keys = public_keys()
    current = next(iter(keys))
    return {
        "algorithm": ALGORITHM,
        "currentKeyId": current,
        "keys": [
            {
                "keyId": kid,
                "current": kid == current,
                "publicKey": base64.b64encode(raw_public(key)).decode(),
                "publicKeyPem": key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
            }
            for kid, key in keys.items()
        ],
        "canonicalForm": "docs/receipts.md",
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


def add_verification(receipt: DeletionReceipt, verification: dict[str, Any], *, trigger: str, key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """Append a sealed record of this result to the receipt (sealed already: the first record
    links to its hash) and show it as the receipt's result. The caller saves both fields, under
    the receipt's row lock when the receipt exists (two re-verifications at once must not both
    append position n), in the same transaction: a record added to a stored receipt is anchored
    in the workspace's chain head here (`anchor`), so dropping it later is reported."""
    key = key or signing_key()
    records = list(receipt.verifications) if isinstance(receipt.verifications, list) else []
    last = records[-1] if records and isinstance(records[-1], dict) else {}
    previous = last.get("sha256", "") if records else receipt.sha256  # a tampered list stays reported as such
    record = {"seq": len(records) + 1, "trigger": trigger, "previousHash": previous, "verification": _stored_json(verification)}
    digest = verification_digest(record)
    record.update(sha256=digest.hex(), keyId=key_id(key.public_key()), signature=key.sign(digest).hex())
    receipt.verifications = [*records, record]
    receipt.verification = record["verification"]
    if receipt.pk is not None:
        anchor(receipt, key)
    return record


# --- the verification anchor --------------------------------------------------------------------------
def anchors_digest(workspace_ref: int, anchors: dict[str, Any]) -> bytes:
    return hashlib.sha256(_canonical_json({"anchors": "receipt-verifications/v1", "workspaceRef": str(workspace_ref), "receipts": anchors})).digest()


def signed_anchors(workspace_ref: int, anchors: dict[str, Any], key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """The chain head's anchor fields for this map (chain position -> [count, newest hash]), signed."""
    key = key or signing_key()
    return {"verification_anchors": anchors, "anchors_key_id": key_id(key.public_key()), "anchors_signature": key.sign(anchors_digest(workspace_ref, anchors)).hex()}


def anchor(receipt: DeletionReceipt, key: Ed25519PrivateKey | None = None) -> None:
    """Record the receipt's record count and newest record hash in its workspace's chain head,
    re-signed, under the head's row lock (two re-verifications at once keep both)."""
    head_id, _seq, _hash = lock_head(int(receipt.workspace_ref))
    current = ReceiptChain.objects.filter(pk=head_id).values_list("verification_anchors", flat=True).first()
    anchors = dict(current) if isinstance(current, dict) else {}
    anchors[str(receipt.chain_seq)] = [len(receipt.verifications), receipt.verifications[-1]["sha256"]]
    ReceiptChain.objects.filter(pk=head_id).update(**signed_anchors(int(receipt.workspace_ref), anchors, key))


def head_anchors(head: ReceiptChain | None, keys: dict[str, Ed25519PublicKey]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the anchor map, a break if its signature does not verify). A head holding receipts must
    carry a signed map (an empty one from its first receipt on, the migration for older heads),
    so clearing it is reported too. No head: nothing anchored (the walk still requires every
    re-verified receipt to be anchored)."""
    if head is None:
        return {}, None
    anchors = head.verification_anchors if head.verification_anchors is not None else {}
    if head.seq == 0 and not anchors and not head.anchors_signature:
        return {}, None
    problem = not isinstance(anchors, dict) or _signature_problem(keys, head.anchors_key_id, head.anchors_signature, anchors_digest(head.workspace_ref, anchors))
    if problem:
        return (anchors if isinstance(anchors, dict) else {}), {"receiptId": None, "chainSeq": None, "reason": ANCHOR_CHANGED}
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
        return VERIFICATION_CHANGED, entry[0] if isinstance(entry, list) and entry and isinstance(entry[0], int) else None
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
                f"INSERT INTO {table} (workspace_ref, seq, head_hash, updated_at) VALUES (%s, 0, %s, now()) ON CONFLICT (workspace_ref) DO UPDATE SET seq = {table}.seq RETURNING id, seq, head_hash",
                [workspace_ref, ZERO_HASH],
            )
            return cursor.fetchone()
    ReceiptChain.objects.bulk_create([ReceiptChain(workspace_ref=workspace_ref)], ignore_conflicts=True)
    head = ReceiptChain.objects.select_for_update().get(workspace_ref=workspace_ref)
    return head.pk, head.seq, head.head_hash


def append(*, verification: dict[str, Any], **fields: Any) -> DeletionReceipt:
    """Write one receipt at the end of its workspace's chain, sealed and signed, with its
    verification result as the first sealed record."""
    with transaction.atomic(savepoint=False):
        head_id, seq, head_hash = lock_head(int(fields["workspace_ref"]))
        receipt = DeletionReceipt(**fields, chain_seq=seq + 1, previous_hash=head_hash, salt=secrets.token_hex(16), proof_format=PROOF_FORMAT, verifications=[])
        key = signing_key()
        seal(receipt, key)
        add_verification(receipt, verification, trigger=RECEIPT_TRIGGER, key=key)
        receipt.save(force_insert=True)
        first = signed_anchors(receipt.workspace_ref, {}, key) if seq == 0 else {}  # the head's anchor is signed from its first receipt on
        ReceiptChain.objects.filter(pk=head_id).update(seq=receipt.chain_seq, head_hash=receipt.sha256, head_receipt_ref=receipt.pk, updated_at=timezone.now(), **first)
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


def check(receipt: DeletionReceipt, *, previous_hash: str, expected_seq: int, keys: dict[str, Ed25519PublicKey]) -> str | None:
    """Why this receipt breaks the chain, or None (its verification records: `check_verifications`)."""
    digest = digest_of(receipt)
    if digest.hex() != receipt.sha256:
        return HASH_MISMATCH
    if receipt.previous_hash != previous_hash or receipt.chain_seq != expected_seq:
        return BROKEN_LINK
    return _signature_problem(keys, receipt.key_id, receipt.signature, digest)


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


def walk(receipts: Iterable[DeletionReceipt], *, previous: str, expected: int, keys: dict[str, Ed25519PublicKey], anchored: bool = False, anchors: dict[str, Any] | None = None) -> Walk:
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
            found.first_break = {"receiptId": str(receipt.pk), "chainSeq": receipt.chain_seq, "reason": problem[0], "verificationSeq": problem[1]}
            break
        found.unproven += not receipt.verifications
        previous, expected = receipt.sha256, receipt.chain_seq + 1
        found.last_seq, found.last_hash = receipt.chain_seq, receipt.sha256
    return found


def _head_break(head: ReceiptChain | None, last_seq: int, last_hash: str) -> dict[str, Any] | None:
    """The chain's head names a later receipt than the last one found (the newest was removed)."""
    if head is not None and (head.seq != last_seq or head.head_hash != last_hash):
        return {"receiptId": str(head.head_receipt_ref) if head.head_receipt_ref is not None else None, "chainSeq": head.seq, "reason": MISSING_RECEIPT}
    return None


def verify_chain(workspace_ref: int, *, keys: dict[str, Ed25519PublicKey] | None = None, newest: int | None = None) -> dict[str, Any]:
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
    found = walk(ordered.iterator(chunk_size=500), previous=ZERO_HASH, expected=1, keys=keys, anchored=checked_from > 1, anchors=anchors)
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
        "unprovenVerifications": found.unproven,  # checked receipts sealed before results were records, not re-verified since
    }
    if checked_from > 1:
        report["checkedFromSeq"] = checked_from
    return report


# --- the verified checkpoint and the bounded check ---------------------------------------------------
#: Receipts of the verified prefix the endpoint re-checks per request, from `sweep_seq` on: a
#: request costs at most this many receipts plus those appended since the last check, and every
#: receipt is re-checked once per ceil(prefix / SWEEP_WINDOW) requests (0.18 ms a receipt,
#: bench/receipt_chain.py: about 90 ms at most).
SWEEP_WINDOW = 500
# Receipts appended since the checkpoint that one verify request checks at most (issue 22 review
# F4): a burst of forgets between two requests is checked over several, the rest reported as not
# verified yet; the command and the daily job check every receipt.
APPEND_CAP = 2000
NOT_VERIFIED_NOTE = "Receipts after verifiedThroughSeq were not verified by this request (at most {cap} new receipts are checked per request); later requests go on from there, the daily receipt_chain_check job and `manage.py verify_receipts` check every receipt."


def checkpoint_digest(workspace_ref: int, seq: int, sha256: str) -> bytes:
    return hashlib.sha256(_canonical_json({"checkpoint": "receipt-chain/v1", "workspaceRef": str(workspace_ref), "seq": int(seq), "sha256": sha256})).digest()


def checkpoint_valid(head: ReceiptChain, keys: dict[str, Ed25519PublicKey]) -> bool:
    """Whether the head's checkpoint was signed by a receipt signing key (a database edit that
    moves it is not): an invalid one counts as none."""
    if head.verified_seq == 0:
        return False
    return _signature_problem(keys, head.checkpoint_key_id, head.checkpoint_signature, checkpoint_digest(head.workspace_ref, head.verified_seq, head.verified_hash)) is None


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


def _in_order(workspace_ref: int, first: int, last: int | None = None):
    receipts = DeletionReceipt.objects.filter(workspace_ref=workspace_ref, chain_seq__gte=first)
    if last is not None:
        receipts = receipts.filter(chain_seq__lte=last)
    return receipts.order_by("chain_seq", "id").iterator(chunk_size=500)


def _stored_hash(workspace_ref: int, seq: int) -> str:
    """The stored hash of the receipt at `seq` (0: the chain's start), checked by an earlier request."""
    if seq == 0:
        return ZERO_HASH
    return DeletionReceipt.objects.filter(workspace_ref=workspace_ref, chain_seq=seq).values_list("sha256", flat=True).first() or ZERO_HASH


def unproven_count(workspace_ref: int) -> int:
    """Receipts of the workspace whose result no record proves: only receipts sealed before
    records existed (proof format 1) can be such, and a partial index finds those."""
    return DeletionReceipt.objects.filter(workspace_ref=workspace_ref, proof_format=1, verifications=[]).count()


def verify_chain_bounded(workspace_ref: int, *, window: int | None = None, keys: dict[str, Ed25519PublicKey] | None = None) -> dict[str, Any]:
    """The verify endpoint's check, bounded per request (docs/receipts.md): from the signed
    checkpoint, the receipts appended since (each request moves the checkpoint up to what it
    found intact, so they are checked once), plus a window of `window` receipts of the verified
    prefix from `sweep_seq` (rotating, so repeated requests re-check the whole prefix). A break
    the window finds lowers the checkpoint below it, so it is reported from then on. A chain no
    longer than the window is checked whole at every request, like `verify_chain`. Receipts
    outside this request's window were checked by an earlier one: `verify_receipts` and the daily
    job check every receipt."""
    window = window or SWEEP_WINDOW
    keys = keys if keys is not None else public_keys()
    head = ReceiptChain.objects.filter(workspace_ref=workspace_ref).first()
    if head is None:  # no chain head (a workspace without receipts, or a removed row): the newest only
        return {**verify_chain(workspace_ref, keys=keys, newest=window), "mode": "newest"}
    anchors, anchor_break = head_anchors(head, keys)
    valid = checkpoint_valid(head, keys) and head.verified_seq <= head.seq
    verified = head.verified_seq if valid else 0
    verified_hash = head.verified_hash if valid else ZERO_HASH
    checked, first_break = 0, None
    sweep_from, sweep_to, next_sweep = None, None, 1
    if verified:
        sweep_from = head.sweep_seq if 1 <= head.sweep_seq <= verified else 1
        sweep_to = min(verified, sweep_from + window - 1)
        # the receipt before the window is its anchor: its hash and signature are checked, its link is not
        swept = walk(_in_order(workspace_ref, max(1, sweep_from - 1), sweep_to), previous=ZERO_HASH, expected=1, keys=keys, anchored=sweep_from > 1, anchors=anchors)
        checked += swept.checked
        if swept.first_break is not None or swept.last_seq < sweep_to:
            # the prefix is intact only up to the receipt before the break (or the gap)
            verified = swept.last_seq if swept.first_break is None else swept.first_break["chainSeq"] - 1
            verified_hash = swept.last_hash if swept.last_seq == verified else _stored_hash(workspace_ref, verified)
        else:
            next_sweep = sweep_to + 1 if sweep_to < verified else 1
    cap = APPEND_CAP
    newer = walk(_in_order(workspace_ref, verified + 1, verified + cap), previous=verified_hash, expected=verified + 1, keys=keys, anchors=anchors)
    checked += newer.checked
    # stopped by the cap, not by the chain's end: what lies beyond is unverified, not missing
    capped = newer.first_break is None and newer.last_seq == verified + cap and head.seq > newer.last_seq
    first_break = newer.first_break or anchor_break or (None if capped else _head_break(head, newer.last_seq, newer.last_hash))
    if first_break is not None:
        metrics.verification_failed("chain", first_break["reason"])
    if not valid or (newer.last_seq, newer.last_hash, next_sweep) != (head.verified_seq, head.verified_hash, head.sweep_seq):
        save_checkpoint(head.pk, rev=head.checkpoint_rev, seq=newer.last_seq, sha256=newer.last_hash, sweep=next_sweep)
    report = {
        "workspaceId": str(workspace_ref),
        "intact": first_break is None,
        "receipts": head.seq,
        "checked": checked,
        "headSeq": head.seq,
        "firstBreak": first_break,
        "unprovenVerifications": unproven_count(workspace_ref),
        "mode": "bounded",
        "verifiedThroughSeq": newer.last_seq,
        "complete": not capped,
        "notVerifiedBeyondSeq": newer.last_seq if capped else None,
        "note": NOT_VERIFIED_NOTE.format(cap=cap) if capped else None,
        "sweptSeqs": [sweep_from, sweep_to] if sweep_from is not None else None,
        "lastFullCheckAt": iso(head.full_check_at) if head.full_check_at else None,
    }
    return report


def chained_workspaces() -> list[int]:
    refs = set(DeletionReceipt.objects.values_list("workspace_ref", flat=True).distinct())
    refs.update(ReceiptChain.objects.values_list("workspace_ref", flat=True))
    return sorted(refs)


def verify_chains(workspace_refs: Iterable[int] | None = None) -> dict[str, Any]:
    keys = public_keys()
    reports = [verify_chain(ref, keys=keys) for ref in (workspace_refs if workspace_refs is not None else chained_workspaces())]
    return {
        "checkedAt": iso(timezone.now()),
        "intact": all(report["intact"] for report in reports),
        "keyIds": list(keys),
        "workspaces": reports,
    }


def check_all_chains() -> dict[str, Any]:
    """Daily job: every workspace's chain checked from its first receipt (and its checkpoint
    rewritten), so a receipt changed below the verify endpoint's checkpoint is reported within a
    day even if nobody runs `verify_receipts`. Counts only."""
    report = verify_chains()
    broken = [chain["workspaceId"] for chain in report["workspaces"] if not chain["intact"]]
    return {"workspaces": len(report["workspaces"]), "receipts": sum(chain["checked"] for chain in report["workspaces"]), "broken": len(broken), "brokenWorkspaceIds": broken}


def member_view(report: dict[str, Any], member_id: int) -> dict[str, Any]:
    """What a member sees of the workspace's chain: whether it is intact (their receipts are only
    as trustworthy as the chain), how many receipts are theirs, and where it breaks only when the
    break is one of their own receipts (never another member's receipt id, nor the total)."""
    own = DeletionReceipt.objects.filter(workspace_ref=int(report["workspaceId"]), member_ref=member_id)
    brk = report["firstBreak"]
    if brk is not None:
        mine = brk["receiptId"] is not None and own.filter(pk=int(brk["receiptId"])).exists()
        brk = {**brk, "own": True} if mine else {"receiptId": None, "chainSeq": None, "reason": brk["reason"], "own": False}
    body = {"workspaceId": report["workspaceId"], "scope": "member", "intact": report["intact"], "receipts": own.count(), "firstBreak": brk}
    if "complete" in report:  # the bounded check: whether it reached the head (positions are not the member's to see)
        body.update(complete=report["complete"], note=report["note"])
    return body


# --- who sees which receipts (SPEC §5, §8) ----------------------------------------------------------
MANAGE = "ask_history:manage"


def visible_receipts(member: Member) -> QuerySet[DeletionReceipt]:
    """Owners (`ask_history:manage`) list every receipt of the workspace, with counts only
    (`receipt_json`); a member lists the receipts of their own memories."""
    receipts = DeletionReceipt.objects.filter(workspace_ref=member.workspace_id)
    return receipts if member.has_perm(MANAGE) else receipts.filter(member_ref=member.pk)


def chain_report_for(member: Member) -> dict[str, Any]:
    """The workspace chain's verification as `member` may see it: the whole report for an
    owner, `member_view` for anyone else."""
    keys = public_keys()
    workspace = verify_chain_bounded(member.workspace_id, keys=keys)
    body = {**workspace, "scope": "workspace"} if member.has_perm(MANAGE) else member_view(workspace, member.pk)
    return {**body, "checkedAt": iso(timezone.now()), "keyIds": list(keys), "publicKeyUrl": PUBLIC_KEY_PATH}


def _english_label(operation: str) -> str:
    # An API field, not a page: the same words whatever the caller's Accept-Language.
    with translation.override("en"):
        return Operation.label_of(operation)


def receipt_json(receipt: DeletionReceipt, *, viewer: Member) -> dict[str, Any]:
    """A member sees their own receipts in full. Anyone else allowed to list a receipt (the
    owner) sees counts only: the filters hold what the member wrote or chose (a namespace, a key
    built from what was said, a memory id), so they are left out with the version ids."""
    own = receipt.member_ref == viewer.pk
    manifest = receipt.manifest if isinstance(receipt.manifest, dict) else {}
    if not own:
        manifest = {"artifacts": manifest.get("artifacts", {}), "requestedIds": manifest.get("requestedIds"), "keysDestroyed": manifest.get("keysDestroyed")}  # never the key ids
    data = {
        "id": str(receipt.pk),
        "operation": receipt.operation,
        "operationLabel": _english_label(receipt.operation),
        "actor": receipt.actor_label,
        "memberId": str(receipt.member_ref) if receipt.member_ref is not None else None,
        "manifest": manifest,
        "requestedAt": iso(receipt.requested_at),
        "unreachableAt": iso(receipt.unreachable_at),
        "purgedAt": iso(receipt.purged_at),
        "residual": receipt.residual,
        "verification": receipt.verification,
    }
    if own:
        data["memoryVersionIds"] = [str(i) for i in receipt.memory_version_ids]
        data["dedupeKey"] = receipt.dedupe_key
        data["salt"] = receipt.salt  # the hashed secret: with it the member recomputes the hash; nobody else may
    data["proof"] = proof_json(receipt)
    return data
