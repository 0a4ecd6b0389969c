"""Deletion receipts: what was erased, when it became unreachable, when it was purged, what may remain."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

from memoryapp.sealing import RowKeyField, SealedField, SealedManager


class Operation(models.TextChoices):
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

    @classmethod
    def label_of(cls, value: str) -> str:
        """The label of a stored operation (in the active language), or the value itself for
        one this code no longer knows."""
        return str(cls(value).label) if value in cls.values else value


class DeletionReceipt(models.Model):
    """Holds no memory content: counts, ids, filters and timestamps only.

    Workspace and member are plain ids so a receipt outlives what it is about.
    """

    operation = models.CharField(max_length=32, choices=Operation.choices, db_index=True)
    workspace_ref = models.BigIntegerField(db_index=True)
    member_ref = models.BigIntegerField(null=True, blank=True, db_index=True, help_text="Set when every erased memory belonged to this member.")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=200)
    manifest = models.JSONField(default=dict, help_text="Artifact classes with counts, and the filters used.")
    memory_version_ids = models.JSONField(default=list, help_text="Ids only, for re-verification.")
    requested_at = models.DateTimeField(default=timezone.now)
    unreachable_at = models.DateTimeField()
    purged_at = models.DateTimeField()
    residual = models.JSONField(default=dict, help_text="What may remain outside the application (backups), and until when.")
    verification = models.JSONField(default=dict)
    dedupe_key = models.CharField(max_length=120, null=True, blank=True, unique=True, help_text="Makes sweep receipts idempotent.")
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
    proof_format = models.PositiveSmallIntegerField(default=2, help_text="2: its verifications are sealed records; 1: sealed before they were.")
    verifications = models.JSONField(default=list, blank=True, help_text="Every verification result, each hashed, linked and signed.")

    class Meta:
        ordering = ["-purged_at", "-id"]
        indexes = [
            models.Index(fields=["workspace_ref", "-purged_at"]),
            # the verify endpoint counts unproven results (format 1) without walking every receipt
            models.Index(fields=["workspace_ref"], condition=models.Q(proof_format=1), name="receipt_format1_by_workspace"),
        ]
        constraints = [models.UniqueConstraint(fields=["workspace_ref", "chain_seq"], name="one_receipt_per_chain_position")]

    def __str__(self) -> str:
        return f"receipt #{self.pk} ({self.operation})"

    @property
    def versions_erased(self) -> int:
        return int(self.manifest.get("artifacts", {}).get("memory_version", 0))


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
    checkpoint_rev = models.PositiveBigIntegerField(db_default=0, help_text="Raised at every checkpoint write: writers update only the revision they read.")
    sweep_seq = models.PositiveBigIntegerField(db_default=1, help_text="Where the next bounded check re-checks the verified prefix.")
    verified_at = models.DateTimeField(null=True, blank=True)
    full_check_at = models.DateTimeField(null=True, blank=True, help_text="When every receipt was last checked from the first (verify_receipts, the daily job).")

    def __str__(self) -> str:
        return f"receipt chain of workspace #{self.workspace_ref} ({self.seq} receipts)"


class UsageCategory(models.TextChoices):
    AI_MEMORY = "ai_memory", "AI memory"
    REPLY = "reply", "Assistant reply"


class UsageStatus(models.TextChoices):
    PENDING = "pending", "Pending settlement"
    SETTLED = "settled", "Settled into the ledger"


class UsageRecord(models.Model):
    """One charged unit of work (a consolidation, or a reported reply), charged to one member.

    Lines are derived: "AI memory (input)" = input tokens/cost, "AI memory (output)" = output.
    """

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="usage_records")
    member = models.ForeignKey("governance.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records")
    role = models.CharField(max_length=10, help_text="The member's role when charged (role quotas).")
    category = models.CharField(max_length=16, choices=UsageCategory.choices, db_index=True)
    model_name = models.CharField(max_length=120)
    conversation_id = models.CharField(max_length=120, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    memory_tokens = models.PositiveIntegerField(default=0, help_text="AI-memory tokens already counted in input_tokens.")
    input_cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    output_cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    status = models.CharField(max_length=8, choices=UsageStatus.choices, default=UsageStatus.PENDING, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "member", "-created_at"])]

    def __str__(self) -> str:
        return f"usage #{self.pk} ({self.category})"

    @property
    def total_cost(self):
        return self.input_cost + self.output_cost


# --- credits (SPEC §9) -------------------------------------------------------------------------
# Invariant, checked by the reconciliation job:
#   CreditAccount.balance == Σ LedgerEntry.amount − Σ cost of PENDING UsageRecords
# A charge deducts the balance and writes a pending usage record in one transaction; settlement
# turns each pending record into exactly one ledger entry (unique per record).

CREDIT_PLACES = 6
CREDIT_DIGITS = 16


class ModelPrice(models.Model):
    """Price of a model in credits per 1,000 tokens (the system model's, and agents' reply models)."""

    model_name = models.CharField(max_length=120, unique=True)
    input_per_1k = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)
    output_per_1k = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model_name"]
        constraints = [models.CheckConstraint(condition=models.Q(input_per_1k__gte=0, output_per_1k__gte=0), name="price_not_negative")]

    def __str__(self) -> str:
        return f"{self.model_name}: {self.input_per_1k} in / {self.output_per_1k} out per 1k tokens"


class CreditAccount(models.Model):
    """A workspace's credit balance. Written only by `retention.credits` (grant, charge)."""

    workspace = models.OneToOneField("governance.Workspace", on_delete=models.CASCADE, related_name="credit_account")
    balance = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, default=0)
    # The last difference the reconciliation found (balance − expected); null when they agree.
    discrepancy = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, null=True, blank=True)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"credits of workspace #{self.workspace_id}: {self.balance}"


class QuotaPeriod(models.TextChoices):
    DAY = "day", "Daily"
    WEEK = "week", "Weekly"
    MONTH = "month", "Monthly"


class MemberQuota(models.Model):
    """How many credits one member may use per period. No row = no member limit."""

    member = models.OneToOneField("governance.Member", on_delete=models.CASCADE, related_name="credit_quota")
    limit = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)
    used = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, default=0)
    period = models.CharField(max_length=8, choices=QuotaPeriod.choices, default=QuotaPeriod.MONTH)
    period_start = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(limit__gte=0), name="member_quota_limit_not_negative")]

    def __str__(self) -> str:
        return f"quota of member #{self.member_id}: {self.used}/{self.limit} per {self.period}"


class RoleQuota(models.Model):
    """How many credits the members of one role may use together per period. No row = no limit."""

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="role_quotas")
    role = models.CharField(max_length=10)
    limit = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)
    used = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, default=0)
    period = models.CharField(max_length=8, choices=QuotaPeriod.choices, default=QuotaPeriod.MONTH)
    period_start = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["workspace_id", "role"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "role"], name="one_quota_per_role"),
            models.CheckConstraint(condition=models.Q(limit__gte=0), name="role_quota_limit_not_negative"),
        ]

    def __str__(self) -> str:
        return f"quota of role {self.role} in workspace #{self.workspace_id}: {self.used}/{self.limit} per {self.period}"


class LedgerKind(models.TextChoices):
    GRANT = "grant", "Credits granted"
    USAGE = "usage", "Usage settled"


class LedgerEntry(models.Model):
    """Append-only. Grants are positive, settled usage negative; one entry per usage record."""

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="ledger_entries")
    kind = models.CharField(max_length=8, choices=LedgerKind.choices, db_index=True)
    amount = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)
    usage_record = models.OneToOneField(UsageRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="ledger_entry")
    member_ref = models.BigIntegerField(null=True, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "ledger entries"
        indexes = [models.Index(fields=["workspace", "-created_at"])]

    def __str__(self) -> str:
        return f"ledger #{self.pk} {self.kind} {self.amount}"


class UsageRollup(models.Model):
    """Daily totals per workspace, member, role and category; recomputed whole, so idempotent."""

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="usage_rollups")
    day = models.DateField()
    member_ref = models.BigIntegerField(default=0, help_text="0 when the member row is gone.")
    role = models.CharField(max_length=10)
    category = models.CharField(max_length=16, choices=UsageCategory.choices)
    records = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    memory_tokens = models.PositiveBigIntegerField(default=0)
    input_cost = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, default=0)
    output_cost = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, default=0)
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-day", "workspace_id", "member_ref", "role", "category"]
        constraints = [models.UniqueConstraint(fields=["workspace", "day", "member_ref", "role", "category"], name="one_rollup_per_day_member_role_category")]

    def __str__(self) -> str:
        return f"{self.day} {self.category} member #{self.member_ref}"


# --- consolidation (SPEC §9) -------------------------------------------------------------------
class ConsolidationStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    SKIPPED = "skipped", "Skipped"
    FAILED = "failed", "Failed"


class Consolidation(models.Model):
    """One submitted conversation turn and what became of it.

    `messages` is the consolidation input: only messages in which the masker found no personal
    data are ever stored here (a turn with any such message is skipped and stores none), and it is
    emptied as soon as the task finishes, whatever the outcome.
    """

    content_fields = frozenset({"messages"})
    content_digests = frozenset({"message_count"})
    metadata_fields = frozenset(
        {
            "id",
            "key_id",
            "workspace",
            "member",
            "member_period",
            "agent",
            "credential_ref",
            "conversation_id",
            "anonymous",
            "status",
            "reason",
            "model_name",
            "memories_found",
            "memories_stored",
            "memory_ids",
            "usage_record",
            "created_at",
            "finished_at",
            "input_purged_at",
        }
    )

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="consolidations")
    member = models.ForeignKey("governance.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="consolidations", help_text="The partner being remembered; empty when anonymous.")
    member_period = models.PositiveIntegerField(null=True, blank=True, help_text="The partner's membership period when the turn was submitted: a turn is never consolidated into a later one.")
    agent = models.ForeignKey("governance.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="consolidations")
    credential_ref = models.BigIntegerField(null=True, blank=True)
    conversation_id = models.CharField(max_length=120)
    anonymous = models.BooleanField(default=False)
    status = models.CharField(max_length=8, choices=ConsolidationStatus.choices, default=ConsolidationStatus.QUEUED, db_index=True)
    reason = models.CharField(max_length=32, blank=True, help_text="Why it was skipped or failed (a code, never content).")
    # Sealed under the row's own data key (memoryapp.sealing), destroyed when the input is purged:
    # a database backup taken while the task waited holds ciphertext only.
    key_id = RowKeyField(null=True, blank=True, unique=True, editable=False)
    messages = SealedField(codec="json", null=True, blank=True, default=None)
    message_count = models.PositiveSmallIntegerField(default=0)
    model_name = models.CharField(max_length=120, blank=True)
    memories_found = models.PositiveSmallIntegerField(default=0)
    memories_stored = models.PositiveSmallIntegerField(default=0)
    memory_ids = models.JSONField(default=list, blank=True)
    usage_record = models.OneToOneField(UsageRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="consolidation")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    input_purged_at = models.DateTimeField(null=True, blank=True)

    objects = SealedManager()

    class Meta:
        base_manager_name = "objects"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "member", "-created_at"])]

    def __str__(self) -> str:
        return f"consolidation #{self.pk} ({self.status}{': ' + self.reason if self.reason else ''})"
