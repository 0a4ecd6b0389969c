"""Credits and usage (SPEC §9): the price list, workspaces' balances, member and role quotas, the
append-only ledger, usage records and their daily rollups, and the consolidation records of
submitted conversation turns (what each turn cost is a usage record). Whose usage a member may
read: `UsageRecord.objects.restrict(member, "view")` (`core.restrict`).

The models moved here from `retention` with their tables: `db_table` keeps the
`retention_*` names, and the migrations only move Django's state (SeparateDatabaseAndState). The
names stay: renaming eight tables that hold the ledger and the usage would break every
backup, restore and report query written against them, for a name only (docs/operations.md,
"Migrations")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.utils import timezone

from core.restrict import check_action
from memoryapp.sealing import RowKeyField, SealedField, SealedManager

if TYPE_CHECKING:
    from governance.models import Member


class UsageCategory(models.TextChoices):
    AI_MEMORY = "ai_memory", "AI memory"
    REPLY = "reply", "Assistant reply"


class UsageStatus(models.TextChoices):
    PENDING = "pending", "Pending settlement"
    SETTLED = "settled", "Settled into the ledger"


#: Who reads every member's usage in the workspace (the owner) rather than only their own.
READ_ALL_USAGE = "usage:read_all"


class UsageRecordQuerySet(models.QuerySet):
    def restrict(self, member: Member, action: str) -> UsageRecordQuerySet:
        """`core.restrict`. "view": the records of the member's workspace with `READ_ALL_USAGE`,
        else the member's own."""
        check_action(action)
        records = self.filter(workspace_id=member.workspace_id)
        return records if member.has_perm(READ_ALL_USAGE) else records.filter(member=member)


class UsageRecord(models.Model):
    """One charged unit of work (a consolidation, or a reported reply), charged to one member.

    Lines are derived: "AI memory (input)" = input tokens/cost, "AI memory (output)" = output.
    """

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="usage_records")
    member = models.ForeignKey(
        "governance.Member", null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_records"
    )
    role = models.CharField(max_length=10, help_text="The member's role when charged (role quotas).")
    category = models.CharField(max_length=16, choices=UsageCategory.choices, db_index=True)
    model_name = models.CharField(max_length=120)
    conversation_id = models.CharField(max_length=120, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    memory_tokens = models.PositiveIntegerField(
        default=0, help_text="AI-memory tokens already counted in input_tokens."
    )
    input_cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    output_cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    status = models.CharField(max_length=8, choices=UsageStatus.choices, default=UsageStatus.PENDING, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    objects = UsageRecordQuerySet.as_manager()

    class Meta:
        db_table = "retention_usagerecord"  # the table it had in retention: moved without a copy
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
        db_table = "retention_modelprice"  # the table it had in retention: moved without a copy
        ordering = ["model_name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(input_per_1k__gte=0, output_per_1k__gte=0), name="price_not_negative"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_name}: {self.input_per_1k} in / {self.output_per_1k} out per 1k tokens"


class CreditAccount(models.Model):
    """A workspace's credit balance. Written only by `credits.charging` (grant, charge)."""

    workspace = models.OneToOneField("governance.Workspace", on_delete=models.CASCADE, related_name="credit_account")
    balance = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, default=0)
    # The last difference the reconciliation found (balance − expected); null when they agree.
    discrepancy = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, null=True, blank=True)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "retention_creditaccount"  # the table it had in retention: moved without a copy

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
        db_table = "retention_memberquota"  # the table it had in retention: moved without a copy
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
        db_table = "retention_rolequota"  # the table it had in retention: moved without a copy
        ordering = ["workspace_id", "role"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "role"], name="one_quota_per_role"),
            models.CheckConstraint(condition=models.Q(limit__gte=0), name="role_quota_limit_not_negative"),
        ]

    def __str__(self) -> str:
        return (
            f"quota of role {self.role} in workspace #{self.workspace_id}: {self.used}/{self.limit} per {self.period}"
        )


class LedgerKind(models.TextChoices):
    GRANT = "grant", "Credits granted"
    USAGE = "usage", "Usage settled"


class LedgerEntry(models.Model):
    """Append-only. Grants are positive, settled usage negative; one entry per usage record."""

    workspace = models.ForeignKey("governance.Workspace", on_delete=models.CASCADE, related_name="ledger_entries")
    kind = models.CharField(max_length=8, choices=LedgerKind.choices, db_index=True)
    amount = models.DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)
    usage_record = models.OneToOneField(
        UsageRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="ledger_entry"
    )
    member_ref = models.BigIntegerField(null=True, blank=True)
    actor_label = models.CharField(max_length=200, blank=True)
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "retention_ledgerentry"  # the table it had in retention: moved without a copy
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
        db_table = "retention_usagerollup"  # the table it had in retention: moved without a copy
        ordering = ["-day", "workspace_id", "member_ref", "role", "category"]
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "day", "member_ref", "role", "category"],
                name="one_rollup_per_day_member_role_category",
            )
        ]

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
    # Its data keys stored before the move to this app name the old owner; the
    # keyring sweep scans both (memoryapp.sealing.owner_labels).
    former_key_owners = ("retention.consolidation",)
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
    member = models.ForeignKey(
        "governance.Member",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="consolidations",
        help_text="The partner being remembered; empty when anonymous.",
    )
    member_period = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The partner's membership period when the turn was submitted: a turn is never consolidated into a "
        "later one.",
    )
    agent = models.ForeignKey(
        "governance.Agent", null=True, blank=True, on_delete=models.SET_NULL, related_name="consolidations"
    )
    credential_ref = models.BigIntegerField(null=True, blank=True)
    conversation_id = models.CharField(max_length=120)
    anonymous = models.BooleanField(default=False)
    status = models.CharField(
        max_length=8, choices=ConsolidationStatus.choices, default=ConsolidationStatus.QUEUED, db_index=True
    )
    reason = models.CharField(
        max_length=32, blank=True, help_text="Why it was skipped or failed (a code, never content)."
    )
    # Sealed under the row's own data key (memoryapp.sealing), destroyed when the input is purged:
    # a database backup taken while the task waited holds ciphertext only.
    key_id = RowKeyField(null=True, blank=True, unique=True, editable=False)
    messages = SealedField(codec="json", null=True, blank=True, default=None)
    message_count = models.PositiveSmallIntegerField(default=0)
    model_name = models.CharField(max_length=120, blank=True)
    memories_found = models.PositiveSmallIntegerField(default=0)
    memories_stored = models.PositiveSmallIntegerField(default=0)
    memory_ids = models.JSONField(default=list, blank=True)
    usage_record = models.OneToOneField(
        UsageRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="consolidation"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    input_purged_at = models.DateTimeField(null=True, blank=True)

    objects = SealedManager()

    class Meta:
        db_table = "retention_consolidation"  # the table it had in retention: moved without a copy
        base_manager_name = "objects"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "member", "-created_at"])]

    def __str__(self) -> str:
        return f"consolidation #{self.pk} ({self.status}{': ' + self.reason if self.reason else ''})"
