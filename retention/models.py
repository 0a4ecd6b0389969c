"""Deletion receipts: what was erased, when it became unreachable, when it was purged, what may remain."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Operation(models.TextChoices):
    FORGET = "forget", "Forget (agent)"
    MEMBER_DELETE = "member_delete", "Deleted by the member"
    OWNER_BULK_DELETE = "owner_bulk_delete", "Owner deleted all agent memories"
    EXPIRY = "expiry", "Retention expiry"
    GRACE_PURGE = "grace_purge", "Expired grace period ended"
    CASCADE_DOCUMENT = "cascade_document", "Cited document deleted"
    CASCADE_COLLECTION = "cascade_collection", "Collection deleted"
    MEMBER_REMOVAL = "member_removal", "Member removed"
    WORKSPACE_DELETION = "workspace_deletion", "Workspace deleted"
    NON_RETAINING = "non_retaining", "Workspace made non-retaining"
    ADMIN_ERASE = "admin_erase", "Erased by a platform admin"
    FORGETTING_CHECK = "forgetting_check", "Forgetting check canary"


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

    class Meta:
        ordering = ["-purged_at", "-id"]
        indexes = [models.Index(fields=["workspace_ref", "-purged_at"])]

    def __str__(self) -> str:
        return f"receipt #{self.pk} ({self.operation})"

    @property
    def versions_erased(self) -> int:
        return int(self.manifest.get("artifacts", {}).get("memory_version", 0))


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
