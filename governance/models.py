"""Workspaces, members and their roles, credentials, settings, and the knowledge side.

Knowledge rows that memories depend on (documents, collections) are deleted for real; citations
keep plain ids, so a deleted source makes its memories unreachable at once (the live re-check
finds it gone) and the cascade then erases them with a receipt.

Over ~400 lines on purpose: each model carries its own QuerySet and row methods (active members,
usable credentials, live context sets, unexpired documents, the collections and documents a member
may read: `restrict`, see `core.restrict`), so every predicate about these rows is written once,
next to the fields it reads (tests/layers/test_model_rules.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.restrict import check_action
from governance.permissions import ROLE_CHOICES, Role, role_has


class Workspace(models.Model):
    name = models.CharField(max_length=200)
    ai_memory_available = models.BooleanField(default=True, help_text="Platform feature flag (platform admins).")
    retains_history = models.BooleanField(
        default=True, help_text="Off: no history is kept and every memory operation is refused."
    )
    created_at = models.DateTimeField(default=timezone.now)
    # Raised in the transaction of every change to the workspace's entities: each process's cached
    # entity matcher (governance.knowledge.matcher_for) is current while this has not moved.
    entity_generation = models.PositiveBigIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def entity_version(self) -> tuple[datetime, int]:
        """What a cached entity matcher of this workspace must have been built for."""
        return self.created_at, self.entity_generation


#: The settings' ranges (SPEC §5.1): the table's check constraints, the API body and the page's
#: form all read them (the form's help text says them in words, translated).
RETENTION_DAYS_RANGE = (1, 365)
GRACE_DAYS_RANGE = (0, 90)
#: The regions a workspace may name for masking (ISO 3166 alpha-2, upper case): the ones whose
#: numbering plans phonenumbers knows (its version's list; "001" and the other non-geographic
#: codes are no region).
PHONE_REGIONS = tuple(sorted(phonenumbers.SUPPORTED_REGIONS))


def validate_phone_region(value: str | None) -> None:
    if value is not None and value not in phonenumbers.SUPPORTED_REGIONS:
        raise ValidationError(_("Not a region code (ISO 3166 alpha-2, upper case, such as DK or PL)."), code="invalid")


class AskHistorySettings(models.Model):
    #: Each setting's name in the API (SPEC §5) → its field: the one map the API, the settings
    #: page, the preview and the export read.
    API_FIELDS = {
        "agentMemoriesEnabled": "agent_memories_enabled",
        "agentMemoryRetentionDays": "agent_memory_retention_days",
        "expiredGraceDays": "expired_grace_days",
        "phoneRegion": "phone_region",
    }
    #: The settings whose change is retroactive on existing memories (previewed, then applied).
    RETENTION_API_FIELDS = ("agentMemoryRetentionDays", "expiredGraceDays")

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="ask_history")
    agent_memories_enabled = models.BooleanField(default=False)
    agent_memory_retention_days = models.PositiveSmallIntegerField(default=90)
    expired_grace_days = models.PositiveSmallIntegerField(default=30)
    #: The workspace's country for masking (docs/masking.md): its mobiles are masked as PHONE in
    #: any grouping, without a phone word, in what members store. None: no region (NULL, the API's
    #: null; the admin's form saves an empty field as None too, so "" is never a second "none").
    phone_region = models.CharField(  # noqa: DJ001
        max_length=2,
        null=True,
        blank=True,
        default=None,
        validators=[validate_phone_region],
        help_text="ISO 3166 alpha-2 (DK, PL…): this country's mobiles are masked in any grouping, without a phone "
        "word.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "ask-history settings"
        verbose_name_plural = "ask-history settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    agent_memory_retention_days__gte=RETENTION_DAYS_RANGE[0],
                    agent_memory_retention_days__lte=RETENTION_DAYS_RANGE[1],
                ),
                name="retention_days_range",
            ),
            models.CheckConstraint(
                condition=Q(expired_grace_days__gte=GRACE_DAYS_RANGE[0], expired_grace_days__lte=GRACE_DAYS_RANGE[1]),
                name="expired_grace_days_range",
            ),
        ]

    def __str__(self) -> str:
        return f"Ask-history settings of workspace #{self.workspace_id}"

    def api_values(self, names: Iterable[str] | None = None) -> dict[str, Any]:
        """The settings under their API names (all of them, or `names`)."""
        return {name: getattr(self, self.API_FIELDS[name]) for name in (names or self.API_FIELDS)}

    def with_api_changes(self, changes: dict[str, Any]) -> AskHistorySettings:
        """An unsaved copy with `changes` (API names) applied: what a dry run would save."""
        copy = AskHistorySettings(
            workspace_id=self.workspace_id, **{field: getattr(self, field) for field in self.API_FIELDS.values()}
        )
        for name, value in changes.items():
            setattr(copy, self.API_FIELDS[name], value)
        return copy


class MemberQuerySet(models.QuerySet):
    def active(self) -> MemberQuerySet:
        """Members still in their workspace (not removed). The one spelling of `left_at IS NULL`
        outside this module (tests/layers/test_model_rules.py fails on a copy)."""
        return self.filter(left_at__isnull=True)

    def removed(self) -> MemberQuerySet:
        return self.filter(left_at__isnull=False)

    def lock(self) -> list[tuple[int, datetime | None, int]]:
        """Take these members' row locks until the transaction ends, in id order (the one order
        every writer that locks several members takes, so two never wait on each other), and
        answer each one's (id, left_at, period) as committed when its lock was granted."""
        return list(self.select_for_update().order_by("pk").values_list("pk", "left_at", "period"))


class Member(models.Model):
    """A user's membership in one workspace. Removal is recorded (left_at), never a silent delete.

    Re-adding a removed member starts a new membership period on the same row (`period` + 1,
    `joined_at` = the re-add): the memories of the earlier period were erased with it, and nothing
    issued before the period began opens it again (`issued_in_period`, `opens_for`)."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=ROLE_CHOICES, default=Role.VIEWER.label)
    remember_me = models.BooleanField(default=True, help_text='"Let the assistant remember me".')
    joined_at = models.DateTimeField(default=timezone.now, help_text="When the current membership period began.")
    left_at = models.DateTimeField(null=True, blank=True)
    period = models.PositiveIntegerField(
        default=1, help_text="1 for the first membership; +1 each time a removed member is re-added."
    )

    objects = MemberQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["workspace", "user"], name="one_membership_per_user")]
        indexes = [models.Index(fields=["user", "left_at"])]

    def __str__(self) -> str:
        return f"member #{self.pk} ({self.role}) of workspace #{self.workspace_id}"

    @property
    def is_active(self) -> bool:
        return self.left_at is None

    def has_perm(self, permission: str) -> bool:
        return self.is_active and role_has(self.role, permission)

    def issued_in_period(self, issued_at: datetime) -> bool:
        """Whether something issued at `issued_at` belongs to the current membership period. An
        agent credential is created by an active member, so one of the first period always does;
        one created before a re-add never does, revoked or not."""
        return issued_at >= self.joined_at

    def opens_for(self, issued_at: datetime | None) -> bool:
        """Whether a personal token or browser session issued at `issued_at` (None: unknown,
        a session from before login times were recorded) opens this membership. Both belong to
        the user, not to one membership, so a first membership opens to them whenever they were
        issued (joining a workspace needs no new login); a re-added one only to those issued
        after the re-add: what someone held while the member was out does not come back to life."""
        return self.is_active and (self.period == 1 or (issued_at is not None and self.issued_in_period(issued_at)))


class CollectionQuerySet(models.QuerySet):
    def restrict(self, member: Member, action: str) -> CollectionQuerySet:
        """`core.restrict`. "view": the collections of the member's workspace they may read:
        unrestricted ones, or restricted ones listing the member."""
        check_action(action)
        return self.filter(Q(workspace_id=member.workspace_id) & (Q(restricted=False) | Q(readers=member))).distinct()


class Collection(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="collections")
    name = models.CharField(max_length=200)
    restricted = models.BooleanField(default=False, help_text="Only the listed members may read it.")
    readers = models.ManyToManyField(Member, blank=True, related_name="readable_collections")
    created_at = models.DateTimeField(default=timezone.now)

    objects = CollectionQuerySet.as_manager()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class DocumentQuerySet(models.QuerySet):
    def unexpired(self, at: datetime | None = None) -> DocumentQuerySet:
        """Readable at `at` (now) as far as expiry goes: no `expires_at`, or one after `at` — a
        document is readable strictly before its expiry instant (`Document.is_expired` as a query)."""
        return self.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=at or timezone.now()))

    def restrict(self, member: Member, action: str) -> DocumentQuerySet:
        """`core.restrict`. "view": the documents the member may read now: of their workspace,
        not expired, in a collection they may read."""
        check_action(action)
        return self.unexpired().filter(
            Q(workspace_id=member.workspace_id)
            & Q(collection__in=Collection.objects.restrict(member, action).values("id"))
        )


class Document(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="documents")
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    title = models.CharField(max_length=300)
    current_version = models.ForeignKey(
        "DocumentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = DocumentQuerySet.as_manager()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.title

    def is_expired(self, at: datetime | None = None) -> bool:
        """Expired at or after its `expires_at` (`DocumentQuerySet.unexpired` selects the others)."""
        return self.expires_at is not None and self.expires_at <= (at or timezone.now())


class DocumentVersion(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["document_id", "number"]
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="one_version_number_per_document")]

    def __str__(self) -> str:
        return f"document #{self.document_id} v{self.number}"


class Passage(models.Model):
    """A "Smart Bite": one non-empty paragraph of a document version, with a stable id."""

    version = models.ForeignKey(DocumentVersion, on_delete=models.CASCADE, related_name="passages")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="passages")
    position = models.PositiveIntegerField()
    text = models.TextField()
    sha256 = models.CharField(max_length=64)
    # The text's length after NFKC, what the workspace's passage volume cap counts (U+FDFA is 18).
    chars = models.PositiveIntegerField(default=0, editable=False)
    # Set at ingestion; cleared once the passage's entity links were written against every entity
    # committed before they were matched (governance.linking).
    links_pending = models.BooleanField(default=False, editable=False)

    class Meta:
        ordering = ["version_id", "position"]
        indexes = [models.Index(fields=["id"], condition=Q(links_pending=True), name="passage_links_pending")]

    def __str__(self) -> str:
        return f"passage #{self.pk}"

    @staticmethod
    def hash_text(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JSONArrayLength(models.Func):
    """The number of elements of a JSON array column (PostgreSQL jsonb, SQLite JSON1)."""

    function = "json_array_length"
    output_field = models.IntegerField()

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, function="jsonb_array_length", **extra_context)


class EntityQuerySet(models.QuerySet):
    def surface_form_count(self) -> int:
        """Names plus aliases of these entities, counted in the database (what a matcher holds)."""
        totals = self.aggregate(names=models.Count("id"), aliases=models.Sum(JSONArrayLength("aliases")))
        return int(totals["names"] or 0) + int(totals["aliases"] or 0)


class Entity(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="entities")
    name = models.CharField(max_length=200)
    aliases = models.JSONField(default=list, blank=True)
    passages = models.ManyToManyField(Passage, blank=True, related_name="entities")
    created_at = models.DateTimeField(default=timezone.now)
    # Linking to the workspace's passages, outside the creating transaction (governance.linking):
    # the passages with a greater id are still to be scanned; null once every passage was.
    link_cursor = models.BigIntegerField(null=True, blank=True, editable=False)

    objects = EntityQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        verbose_name_plural = "entities"

    def __str__(self) -> str:
        return self.name

    @property
    def links_status(self) -> str:
        """ "linked" once every passage was scanned for it, else "pending" (the API's word)."""
        return "pending" if self.link_cursor is not None else "linked"

    @property
    def surface_forms(self) -> list[str]:
        return [self.name, *[alias for alias in self.aliases if alias]]

    @staticmethod
    def changed(workspace_id: int) -> None:
        """The workspace's entities changed (inside the change's transaction): every process's
        cached matcher of the workspace is stale from the commit on. Connected to Entity's
        post_save and post_delete (GovernanceConfig.ready), so the admin and any queryset delete
        count too; a raw `QuerySet.update()` of names or aliases must call it itself."""
        Workspace.objects.filter(pk=workspace_id).update(entity_generation=models.F("entity_generation") + 1)


def entity_changed(sender: type, instance: Entity, **kwargs: object) -> None:
    Entity.changed(instance.workspace_id)


class ContextSetQuerySet(models.QuerySet):
    def live(self) -> ContextSetQuerySet:
        """Context sets not deleted (active or paused): the one spelling of `deleted_at IS NULL`
        outside this module (tests/layers/test_model_rules.py fails on a copy)."""
        return self.filter(deleted_at__isnull=True)


class ContextSet(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="context_sets")
    name = models.CharField(max_length=200)
    active = models.BooleanField(default=True)
    collections = models.ManyToManyField(Collection, blank=True, related_name="context_sets")
    documents = models.ManyToManyField(Document, blank=True, related_name="context_sets")
    created_at = models.DateTimeField(default=timezone.now)
    # Soft delete: a credential bound to a deleted set must keep refusing, never fall back to "unbound".
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = ContextSetQuerySet.as_manager()

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def usable(self) -> bool:
        return self.active and not self.is_deleted


class CredentialQuerySet(models.QuerySet):
    def restrict(self, member: Member, action: str) -> CredentialQuerySet:
        """`core.restrict`. "view": the member's own credentials, whatever the role."""
        check_action(action)
        return self.filter(workspace_id=member.workspace_id, member=member)

    def not_revoked(self) -> CredentialQuerySet:
        return self.filter(revoked_at__isnull=True)

    def revoked(self) -> CredentialQuerySet:
        return self.filter(revoked_at__isnull=False)

    def active(self, at: datetime | None = None) -> CredentialQuerySet:
        """Usable at `at` (now): neither revoked nor expired — `Credential.is_usable` as a query."""
        return self.not_revoked().filter(Q(expires_at__isnull=True) | Q(expires_at__gt=at or timezone.now()))

    def with_usable_siblings(self, at: datetime | None = None) -> CredentialQuerySet:
        """Each credential with `usable_siblings`: how many of its member's credentials are usable
        at `at` (itself included), counted in the same query (the rate limiter's member bound)."""
        siblings = (
            Credential.objects.active(at)
            .filter(member_id=models.OuterRef("member_id"))
            .order_by()
            .values("member_id")
            .annotate(n=models.Count("pk"))
            .values("n")
        )
        return self.annotate(usable_siblings=Coalesce(models.Subquery(siblings), 0))

    def expired(self, at: datetime | None = None) -> CredentialQuerySet:
        """Past its expiry and never revoked (a revoked one counts as revoked)."""
        return self.not_revoked().filter(expires_at__lte=at or timezone.now())


class CredentialStatus(models.TextChoices):
    """What a credential is now, as the pages and the admin show it (revoked wins over expired)."""

    ACTIVE = "active", _("Active")
    EXPIRED = "expired", _("Expired")
    REVOKED = "revoked", _("Revoked")


class Credential(models.Model):
    """An agent credential. The token is shown once; only its SHA-256 is stored, found by prefix."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="credentials")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="credentials")
    name = models.CharField(max_length=120)
    scopes = models.JSONField(default=list)
    context_set = models.ForeignKey(
        ContextSet, null=True, blank=True, on_delete=models.RESTRICT, related_name="credentials"
    )
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = CredentialQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["workspace", "revoked_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    def is_usable(self, now: datetime | None = None) -> bool:
        return not self.is_revoked and not self.is_expired(now)

    def status(self, now: datetime | None = None) -> CredentialStatus:
        if self.is_revoked:
            return CredentialStatus.REVOKED
        return CredentialStatus.EXPIRED if self.is_expired(now) else CredentialStatus.ACTIVE


class AuditEvent(models.Model):
    """Who changed what governance state, written in the same transaction as the change."""

    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    workspace_ref = models.BigIntegerField(
        null=True, blank=True, db_index=True, help_text="Kept after the workspace is deleted."
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=200, blank=True)
    changes = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label or 'system'}"


class PersonalTokenQuerySet(models.QuerySet):
    def active(self) -> PersonalTokenQuerySet:
        """Not revoked (a personal token has no expiry)."""
        return self.filter(revoked_at__isnull=True)


class PersonalToken(models.Model):
    """A member's own token for the workspace API (`Authorization: Token …`); stored as a hash."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_tokens")
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = PersonalTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"personal token {self.prefix}…"


class Agent(models.Model):
    """An assistant configuration (seed 002). Consolidation of its conversations into assistant
    memories needs its "vector memory" switch on; it is off until an admin turns it on."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=120)
    vector_memory = models.BooleanField(
        default=False, help_text='"Vector memory": conversations with this agent may be consolidated into AI memories.'
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} (agent #{self.pk})"
