"""Deletion receipts: what was erased, when it became unreachable, when it was purged, what may remain.
Who may see which: `DeletionReceipt.objects.restrict(member, "view")` (`core.restrict`).

Credits, usage and consolidation records live in the `credits` app."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.choices import LabelledChoices
from core.restrict import check_action
from core.timestamps import iso
from memoryapp.keyring import KekRecord

if TYPE_CHECKING:
    from governance.models import Member


class Operation(LabelledChoices):
    """Why memories were erased. The labels are the one table of their names: the pages show
    them translated, the admin and the receipts API in English."""

    FORGET = "forget", gettext_lazy("Forgotten by an agent")
    MEMBER_DELETE = "member_delete", gettext_lazy("Deleted by the member")
    OWNER_BULK_DELETE = "owner_bulk_delete", gettext_lazy("Owner deleted all agent memories")
    EXPIRY = "expiry", gettext_lazy("Retention expiry")
    GRACE_PURGE = "grace_purge", gettext_lazy("Expired grace period ended")
    CASCADE_DOCUMENT = "cascade_document", gettext_lazy("Cited document deleted")
    CASCADE_COLLECTION = "cascade_collection", gettext_lazy("Collection deleted")
    MEMBER_REMOVAL = "member_removal", gettext_lazy("Member removed")
    WORKSPACE_DELETION = "workspace_deletion", gettext_lazy("Workspace deleted")
    NON_RETAINING = "non_retaining", gettext_lazy("Workspace made non-retaining")
    ADMIN_ERASE = "admin_erase", gettext_lazy("Erased by a platform admin")
    FORGETTING_CHECK = "forgetting_check", gettext_lazy("Forgetting check")
    KEY_SWEEP = "key_sweep", gettext_lazy("Left by an interrupted erase (data key already destroyed)")


#: Who lists every receipt of the workspace (the owner): counts only, `receipt_access.receipt_json`.
RECEIPTS_OF_WORKSPACE = "ask_history:manage"


class DeletionReceiptQuerySet(models.QuerySet):
    def restrict(self, member: Member, action: str) -> DeletionReceiptQuerySet:
        """`core.restrict`. "view": every receipt of the member's workspace for an owner
        (`RECEIPTS_OF_WORKSPACE`), else the receipts of the member's own memories."""
        check_action(action)
        receipts = self.filter(workspace_ref=member.workspace_id)
        return receipts if member.has_perm(RECEIPTS_OF_WORKSPACE) else receipts.filter(member_ref=member.pk)


class DeletionReceipt(models.Model):
    """Holds no memory content: counts, ids, filters and timestamps only.

    Workspace and member are plain ids so a receipt outlives what it is about.
    """

    operation = models.CharField(max_length=32, choices=Operation.choices, db_index=True)
    workspace_ref = models.BigIntegerField(db_index=True)
    member_ref = models.BigIntegerField(
        null=True, blank=True, db_index=True, help_text="Set when every erased memory belonged to this member."
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200)
    manifest = models.JSONField(default=dict, help_text="Artifact classes with counts, and the filters used.")
    memory_version_ids = models.JSONField(default=list, help_text="Ids only, for re-verification.")
    requested_at = models.DateTimeField(default=timezone.now)
    unreachable_at = models.DateTimeField()
    purged_at = models.DateTimeField()
    residual = models.JSONField(
        default=dict, help_text="What may remain outside the application (backups), and until when."
    )
    residual_until = models.DateTimeField(
        null=True,
        blank=True,
        db_index=True,
        help_text="When the last key-encryption key that may have wrapped the erased keys is destroyed "
        "(residual.kek.until): from then on no copy can be read. Null: rotation off or operator-run.",
    )
    verification = models.JSONField(default=dict)
    dedupe_key = models.CharField(
        max_length=120, null=True, blank=True, unique=True, help_text="Makes sweep receipts idempotent."
    )
    # The workspace's hash chain (docs/receipts.md), written once by `retention.receipts.append`:
    # the position in the chain, the SHA-256 of the canonical JSON of the fields above that never
    # change (not `verification`, not `actor`), the previous receipt's hash, and the Ed25519
    # signature of this hash by the key `key_id` names.
    chain_seq = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    previous_hash = models.CharField(max_length=64, blank=True, default="")
    key_id = models.CharField(max_length=32, blank=True, default="")
    signature = models.CharField(max_length=128, blank=True, default="")
    # A random secret hashed with the fields (docs/receipts.md "The salt"): the hash is shown to
    # the owner, who sees every other hashed field, so without it the owner could confirm a guessed
    # key or memory id offline. Only the member (their receipts, their export) is shown it.
    # Empty on receipts sealed before it existed (their hash does not include it).
    salt = models.CharField(max_length=32, blank=True, default="")
    # Verification results are proven too (docs/receipts.md "Verifications"): the erase's own
    # result and every re-verification is a record appended to `verifications`, hashed, linked to
    # the receipt's hash (or the record before it) and signed; `verification` is the newest
    # record's result, the one people read, and `verify_chain` checks that it is. Format 2 is
    # hashed into the receipt ("proofFormat"), so a receipt cannot pass for an older one whose
    # result no record covers (format 1: every receipt sealed before records existed).
    proof_format = models.PositiveSmallIntegerField(
        default=2, help_text="2: its verifications are sealed records; 1: sealed before they were."
    )
    verifications = models.JSONField(
        default=list, blank=True, help_text="Every verification result, each hashed, linked and signed."
    )
    # Receipts written before their names were sealed (docs/receipts.md "Names in receipts"):
    # migration 0014 replaced the plain namespace and key in `manifest` with keyed digests, so the
    # fields no longer hash to `sha256` (which the signature, the next receipt's link and the
    # verification records keep covering); this signed record binds the hash they hash to now
    # (`redactedSha256`) to it. None on every receipt written since (its digests were hashed).
    redaction = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text="Set when the receipt's names were sealed after it was signed: the hash its fields have now, signed.",
    )

    objects = DeletionReceiptQuerySet.as_manager()

    class Meta:
        ordering = ["-purged_at", "-id"]
        indexes = [
            models.Index(fields=["workspace_ref", "-purged_at"]),
            # the verify endpoint counts unproven results (format 1) without walking every receipt
            models.Index(
                fields=["workspace_ref"], condition=models.Q(proof_format=1), name="receipt_format1_by_workspace"
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["workspace_ref", "chain_seq"], name="one_receipt_per_chain_position")
        ]

    def __str__(self) -> str:
        return f"receipt #{self.pk} ({self.operation})"

    # What the pages, the admin and its CSV read of a receipt; a field an old receipt lacks reads as 0 / None.
    def artifact_count(self, artifact: str) -> int:
        artifacts = self.manifest.get("artifacts", {}) if isinstance(self.manifest, dict) else {}
        return int(artifacts.get(artifact, 0))

    @property
    def versions_erased(self) -> int:
        return self.artifact_count("memory_version")

    @property
    def verified_clean(self) -> bool | None:
        """The newest verification's verdict (None: never verified)."""
        return self.verification.get("clean") if isinstance(self.verification, dict) else None

    @property
    def verified_at(self) -> str | None:
        return self.verification.get("checkedAt") if isinstance(self.verification, dict) else None

    def _backups(self) -> dict:
        backups = self.residual.get("backups") if isinstance(self.residual, dict) else None
        return backups if isinstance(backups, dict) else {}

    @property
    def backup_days(self) -> int:
        """How many days backups may still hold what it erased (the residual window)."""
        return int(self._backups().get("retentionDays", 0))

    def kek_ids(self) -> list[str]:
        kek = self.residual.get("kek") if isinstance(self.residual, dict) else None
        ids = kek.get("kekIds") if isinstance(kek, dict) else None
        return [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []

    def residual_closed_at(self, destroyed: dict[str, datetime | None] | None = None) -> datetime | None:
        """When the residual window closed: the last of its KEKs' recorded destruction (None: one
        still exists, or the receipt names none). `destroyed`: the KEK records, when the caller
        read them for many receipts at once."""
        ids = self.kek_ids()
        if not ids:
            return None
        if destroyed is None:
            destroyed = KekRecord.objects.destroyed_at(ids)
        instants = [destroyed.get(i) for i in ids]
        return None if any(at is None for at in instants) else max(instants)

    def residual_json(self, destroyed: dict[str, datetime | None] | None = None) -> dict:
        """residualUntil as the APIs, the export and the admin show it: the promised instant, when
        it actually closed, and whether it has."""
        closed = self.residual_closed_at(destroyed)
        return {
            "residualUntil": iso(self.residual_until),
            "residualClosedAt": iso(closed),
            "residualOpen": closed is None,
        }

    @property
    def backups_until(self) -> str | None:
        return self._backups().get("until")


class ReceiptChain(models.Model):
    """The head of one workspace's receipt chain: the row an append locks (SELECT … FOR UPDATE),
    so two erases at once cannot both link to the same previous receipt. Keyed by the plain
    workspace id: the chain outlives the workspace like its receipts do."""

    workspace_ref = models.BigIntegerField(unique=True)
    seq = models.PositiveBigIntegerField(default=0, help_text="Position of the last receipt (0: none yet).")
    head_hash = models.CharField(max_length=64, default="0" * 64)
    head_receipt_ref = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The verified checkpoint (docs/receipts.md "Checking the chain on the server"): receipts 1 …
    # verified_seq were found intact, the last of them hashing to verified_hash; signed with the
    # receipt signing key, so a database edit cannot move it past a changed receipt. The verify
    # endpoint checks from it on (and re-checks a window of the prefix, from sweep_seq, each
    # time); `verify_receipts` and the daily job check everything and rewrite it. Database
    # defaults: `receipts.lock_head` creates the row with a raw upsert naming its own columns.
    verified_seq = models.PositiveBigIntegerField(db_default=0)
    verified_hash = models.CharField(max_length=64, db_default="0" * 64)
    checkpoint_key_id = models.CharField(max_length=32, blank=True, db_default="")
    checkpoint_signature = models.CharField(max_length=128, blank=True, db_default="")
    checkpoint_rev = models.PositiveBigIntegerField(
        db_default=0, help_text="Raised at every checkpoint write: writers update only the revision they read."
    )
    sweep_seq = models.PositiveBigIntegerField(
        db_default=1, help_text="Where the next bounded check re-checks the verified prefix."
    )
    verified_at = models.DateTimeField(null=True, blank=True)
    full_check_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When every receipt was last checked from the first (verify_receipts, the daily job).",
    )
    # The verification anchor (docs/receipts.md "Verification records"): for every receipt given a
    # record after it was written (a re-verification), its chain position -> [record count, newest
    # record's hash], signed with the receipt signing key. The receipt's own hash cannot commit to
    # records appended later, so without it dropping the newest record (and setting the shown
    # result back) left no trace. Null: none yet (read as {}); signed from the first receipt on.
    verification_anchors = models.JSONField(null=True, blank=True)
    anchors_key_id = models.CharField(max_length=32, blank=True, db_default="")
    anchors_signature = models.CharField(max_length=128, blank=True, db_default="")

    def __str__(self) -> str:
        return f"receipt chain of workspace #{self.workspace_ref} ({self.seq} receipts)"
