"""The memory store: versioned, masked notes, their citations and their embeddings.

Every memory is a chain of versions sharing (member, namespace, key); a keyless memory is a chain
of one. `valid_to IS NULL` marks the current version, and a partial unique constraint keeps at
most one current version per key, whatever the concurrency.

Over ~400 lines on purpose: each model carries its own QuerySet (the expiry rule, the read
filters, which versions and access entries a member may see: `restrict(member, "view")`, see
`core.restrict`), so every predicate about these rows is written once, next to its fields.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.expressions import CombinedExpression
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.choices import LabelledChoices
from core.restrict import check_action
from governance.models import Credential, Member, Workspace
from memoryapp.keyring import DataKey  # noqa: F401 -- the key store's one model (it lives in the `keyring` database)
from memoryapp.sealing import RowKeyField, SealedField, SealedManager, SealedQuerySet, row_cipher

if TYPE_CHECKING:
    from governance.models import AskHistorySettings

ASSISTANT_NAMESPACE = "assistant"
#: The closed vocabulary of `kind` (SPEC §4.1; the AI memory page offers the same three).
MEMORY_KINDS = ("preference", "fact", "instruction")


class Source(LabelledChoices):
    """Source tags (SPEC §7): the page's text always says what the colour means."""

    AGENT = "agent", gettext_lazy("Agent")
    USER_REQUEST = "user_request", gettext_lazy("User request")
    ASSISTANT_INITIATED = "assistant_initiated", gettext_lazy("Assistant recorded")
    MANUAL = "manual", gettext_lazy("Manual")
    AI_EXTRACTED = "ai_extracted", gettext_lazy("AI extracted")


AGENT_API_SOURCES = (Source.AGENT, Source.USER_REQUEST, Source.ASSISTANT_INITIATED)


class MemoryState(models.TextChoices):
    ACTIVE = "active", "Active"
    EXPIRED = "expired", "Expired"  # assistant memories only: kept for reactivation during the grace period


def retention_cutoff(days: int, at: datetime | None = None) -> datetime:
    """The expiry rule (SPEC §8): a version is live while `retention_anchor > at - days`.
    Expiry is computed, never stored, so a changed setting applies to every version at once."""
    return (at or timezone.now()) - timedelta(days=days)


def grace_cutoff(days: int, grace: int, at: datetime | None = None) -> datetime:
    """An expired assistant memory is kept while `retention_anchor > at - (days + grace)`; past
    it the grace purge erases it (0 days of grace: at expiry)."""
    return retention_cutoff(days + grace, at)


def expires_from(anchor: datetime, days: int) -> datetime:
    """The expiry instant of a version anchored at `anchor` under `days` of retention."""
    return anchor + timedelta(days=days)


def expiry_expression(days: int) -> CombinedExpression:
    """`expires_from` as a database expression over each row's anchor (to store `expired_at`)."""
    return F("retention_anchor") + timedelta(days=days)


# The predicates as conditions, for aggregates (`Count(filter=…)`) and unions; querysets call the
# MemoryVersionQuerySet methods below, which are written with them.
def past_retention_q(days: int, at: datetime | None = None) -> Q:
    return Q(retention_anchor__lte=retention_cutoff(days, at))


def current_q() -> Q:
    """The current version of its chain (`valid_to IS NULL`)."""
    return Q(valid_to__isnull=True)


def unreachable_q() -> Q:
    """Marked by a cascade, waiting for its erase."""
    return Q(unreachable_at__isnull=False)


def assistant_q() -> Q:
    """An assistant memory (namespace `assistant`)."""
    return Q(namespace=ASSISTANT_NAMESPACE)


class MemoryVersionQuerySet(SealedQuerySet):
    """The predicates every read, sweep, preview and count of memory versions shares. Nothing
    outside this module spells `retention_anchor` comparisons or the namespace split
    (tests/layers/test_model_rules.py fails on a copy)."""

    def agent(self) -> MemoryVersionQuerySet:
        """Agent memories: every namespace except `assistant`."""
        return self.exclude(assistant_q())

    def assistant(self) -> MemoryVersionQuerySet:
        """Assistant memories: namespace `assistant`, the topic as key."""
        return self.filter(assistant_q())

    def reachable(self) -> MemoryVersionQuerySet:
        """No cascade has marked it unreachable (waiting for its erase)."""
        return self.exclude(unreachable_q())

    def unreachable(self) -> MemoryVersionQuerySet:
        """Marked by a cascade in its cause's transaction: every read skips it; erased next."""
        return self.filter(unreachable_q())

    def within_retention(self, days: int, *, at: datetime | None = None) -> MemoryVersionQuerySet:
        return self.filter(retention_anchor__gt=retention_cutoff(days, at))

    def past_retention(self, days: int, *, at: datetime | None = None) -> MemoryVersionQuerySet:
        return self.filter(past_retention_q(days, at))

    def within_grace(self, days: int, grace: int, *, at: datetime | None = None) -> MemoryVersionQuerySet:
        return self.filter(retention_anchor__gt=grace_cutoff(days, grace, at))

    def past_grace(self, days: int, grace: int, *, at: datetime | None = None) -> MemoryVersionQuerySet:
        return self.filter(retention_anchor__lte=grace_cutoff(days, grace, at))

    def live(self, ask_history: AskHistorySettings, *, at: datetime | None = None) -> MemoryVersionQuerySet:
        """What a read may return: reachable, active, and not expired at `at` (now),
        whether or not a sweep ran. Expired memories are gone for every read and every asOf."""
        return (
            self.reachable()
            .filter(state=MemoryState.ACTIVE)
            .within_retention(ask_history.agent_memory_retention_days, at=at)
        )

    def kept_for_member(self, ask_history: AskHistorySettings, *, at: datetime | None = None) -> MemoryVersionQuerySet:
        """What the member still sees of their own memories (their export, their access log):
        live agent memories, and assistant memories until their grace ends (an expired one is
        offered for reactivation). Never an unreachable one."""
        days, grace = ask_history.agent_memory_retention_days, ask_history.expired_grace_days
        assistant = assistant_q() & Q(retention_anchor__gt=grace_cutoff(days, grace, at))
        agent = ~assistant_q() & Q(state=MemoryState.ACTIVE, retention_anchor__gt=retention_cutoff(days, at))
        return self.reachable().filter(assistant | agent)

    def current(self) -> MemoryVersionQuerySet:
        """The current version of each chain (`valid_to IS NULL`)."""
        return self.filter(current_q())

    def superseded(self) -> MemoryVersionQuerySet:
        """Versions a newer one replaced (history)."""
        return self.exclude(current_q())

    def current_or_as_of(self, as_of: datetime | None) -> MemoryVersionQuerySet:
        """The version current now or current at `as_of` (`validFrom ≤ asOf < validTo`)."""
        if as_of is None:
            return self.current()
        return self.filter(Q(valid_from__lte=as_of) & (current_q() | Q(valid_to__gt=as_of)))

    def restrict(
        self, member: Member, action: str, *, ask_history: AskHistorySettings | None = None, at: datetime | None = None
    ) -> MemoryVersionQuerySet:
        """`core.restrict`. "view": the member's live versions at `at` (now), what any read of
        them may return (`live`). "keep": what the member still holds of them (`kept_for_member`).
        `ask_history`: the workspace's settings, read when not given. A member belongs to one
        workspace, so filtering by member alone is complete, and it lets PostgreSQL walk the
        ordered (member, -created_at, -id) index instead of AND-ing bitmaps."""
        check_action(action, {"view", "keep"})
        settings_ = ask_history if ask_history is not None else member.workspace.ask_history
        own = self.filter(member=member)
        return own.live(settings_, at=at) if action == "view" else own.kept_for_member(settings_, at=at)

    def matching(
        self,
        *,
        as_of: datetime | None = None,
        namespace: str | None = None,
        key: str | None = None,
        collection_id: int | None = None,
    ) -> MemoryVersionQuerySet:
        """The read filters of list and recall (the agent API; the member's agent-memory list in
        the API and on the page): the version current now (or at `as_of`), in that namespace,
        key and collection when given, newest first."""
        queryset = self.current_or_as_of(as_of)
        if namespace:
            queryset = queryset.filter(namespace=namespace)
        if key:
            queryset = queryset.filter(key=key)
        if collection_id is not None:
            queryset = queryset.filter(collection_id=collection_id)
        return queryset.order_by("-created_at", "-id")


class MemoryVersion(models.Model):
    # What the admin may touch (governance/content.py): content is never shown or queried,
    # digests are shown but never queried, metadata is both. Content is stored only sealed
    # (AES-256-GCM under the version's own data key, memoryapp.sealing, SPEC §8.2).
    content_fields = frozenset({"text", "details", "kind"})
    content_digests = frozenset({"text_length", "masked_kinds"})
    keyed_digests = frozenset({"text_hmac"})
    metadata_fields = frozenset(
        {
            "id",
            "key_id",
            "workspace",
            "member",
            "credential",
            "source",
            "namespace",
            "key",
            "collection_id",
            "moved_from",
            "version",
            "valid_from",
            "valid_to",
            "created_at",
            "retention_anchor",
            "state",
            "expired_at",
            "unreachable_at",
            "unreachable_reason",
        }
    )

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memory_versions")
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="memory_versions")
    credential = models.ForeignKey(
        Credential, null=True, blank=True, on_delete=models.SET_NULL, related_name="memory_versions"
    )
    source = models.CharField(max_length=24, choices=Source.choices, default=Source.AGENT)
    namespace = models.CharField(max_length=64)
    # SPEC: a memory without a key is NULL, not "" (keys are unique per namespace when set
    key = models.CharField(max_length=120, null=True, blank=True)  # noqa: DJ001
    # The id of the version's data key in the key store, chosen before the INSERT (the ciphertexts'
    # associated data names it); NULL only on a row stored before encryption (encrypt_memories).
    key_id = RowKeyField(null=True, blank=True, unique=True, editable=False)
    text = SealedField(codec="text", help_text="Masked text, sealed; the original is never stored.")
    # HMAC-SHA256 under a key derived from the version's own data key (crypto.DataKeyCipher.digest),
    # computed when the text is sealed, never a plain hash: the admin shows it, and a plain SHA-256
    # would confirm a guessed text offline (SPEC §8.2). It dies with the key: once the erase has
    # destroyed it, a backup's copy of this digest confirms no guess, whatever server secret the
    # attacker holds. Every version differs (equal texts included). The member's own export computes
    # the plain SHA-256 from the text instead.
    text_hmac = models.CharField(max_length=64, editable=False, default="")
    text_length = models.PositiveIntegerField(editable=False)
    masked_kinds = models.JSONField(default=list, blank=True)
    kind = SealedField(codec="text", default="", blank=True)
    details = SealedField(codec="text", default="", blank=True, help_text="Masked, sealed; one item per line.")
    collection_id = models.BigIntegerField(
        null=True, blank=True, help_text="Plain id: a deleted collection hides, then erases, the memory."
    )
    version = models.PositiveIntegerField(default=1)
    valid_from = models.DateTimeField(default=timezone.now)
    valid_to = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Expiry is computed from this anchor and the workspace's current retention setting, so a
    # change of the setting applies to existing memories at once without rewriting rows.
    retention_anchor = models.DateTimeField(default=timezone.now)
    state = models.CharField(max_length=8, choices=MemoryState.choices, default=MemoryState.ACTIVE)
    expired_at = models.DateTimeField(null=True, blank=True)
    # Set in the same transaction as a cascade's cause; read paths skip it before the erase runs.
    unreachable_at = models.DateTimeField(null=True, blank=True)
    unreachable_reason = models.CharField(max_length=32, blank=True, help_text="The cascade that will erase it.")
    moved_from = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Plain id of the version a topic edit moved this memory from: erasing this chain erases that "
        "history too.",
    )

    objects = MemoryVersionQuerySet.as_manager()  # a SealedQuerySet: it opens what it fetches

    class Meta:
        base_manager_name = "objects"  # related lookups and refresh_from_db open the content too
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["member", "namespace", "key"],
                condition=Q(valid_to__isnull=True, key__isnull=False),
                name="one_current_version_per_key",
            ),
            models.UniqueConstraint(
                fields=["member", "namespace", "key", "version"],
                condition=Q(key__isnull=False),
                name="gap_free_version_numbers",
            ),
        ]
        indexes = [
            # recall/list: the newest current memories of one member
            models.Index(
                fields=["member", "-created_at", "-id"], condition=Q(valid_to__isnull=True), name="current_by_member"
            ),
            # asOf, the cap count and erasure by member
            models.Index(fields=["member", "-created_at", "-id"], name="versions_by_member"),
            models.Index(fields=["member", "namespace", "key"], name="chain_lookup"),
            # expiry sweeps
            models.Index(fields=["workspace", "retention_anchor"], name="expiry_sweep"),
            models.Index(fields=["collection_id"], condition=Q(collection_id__isnull=False), name="by_collection"),
            models.Index(fields=["unreachable_at"], condition=Q(unreachable_at__isnull=False), name="pending_erasure"),
        ]

    def __str__(self) -> str:
        return f"memory version #{self.pk}"

    def save(self, *args, **kwargs):
        update_fields = kwargs.get("update_fields")
        if isinstance(self.text, str) and (update_fields is None or "text" in update_fields):
            # The text is sealed by this save: its digest is keyed by the same data key.
            self.text_hmac = row_cipher(self)[1].digest(self.text)
            self.text_length = len(self.text)
            if update_fields is not None:
                kwargs["update_fields"] = {*update_fields, "text_hmac", "text_length"}
        super().save(*args, **kwargs)

    @property
    def is_assistant(self) -> bool:
        return self.namespace == ASSISTANT_NAMESPACE

    @property
    def is_current(self) -> bool:
        """The row-level `current()`: no newer version replaced it."""
        return self.valid_to is None

    def expires_at(self, ask_history: AskHistorySettings) -> datetime:
        """`expiresAt` (SPEC §3): the anchor plus the workspace's retention now."""
        return expires_from(self.retention_anchor, ask_history.agent_memory_retention_days)

    def grace_ends_at(self, ask_history: AskHistorySettings) -> datetime:
        """When the grace purge erases an expired assistant memory: its expiry plus
        `expiredGraceDays`, both at the workspace's settings now (what `past_grace` selects)."""
        return self.expires_at(ask_history) + timedelta(days=ask_history.expired_grace_days)

    def erased_by_expiry_at(self, ask_history: AskHistorySettings) -> datetime:
        """When expiry erases it: an agent memory at its expiry, an assistant one when its grace ends."""
        return self.grace_ends_at(ask_history) if self.is_assistant else self.expires_at(ask_history)

    def is_live(self, ask_history: AskHistorySettings, at: datetime | None = None) -> bool:
        """The row-level `MemoryVersionQuerySet.live` for a version already read (reachability
        aside): active and not expired at `at`."""
        return self.state == MemoryState.ACTIVE and self.retention_anchor > retention_cutoff(
            ask_history.agent_memory_retention_days, at
        )


class Citation(models.Model):
    """A memory version's reference to a passage: ids and the SHA-256 of the text, never the text."""

    memory = models.ForeignKey(MemoryVersion, on_delete=models.CASCADE, related_name="citations")
    position = models.PositiveSmallIntegerField()
    passage_id = models.BigIntegerField()
    document_id = models.BigIntegerField()
    document_version_id = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["memory_id", "position"]
        indexes = [models.Index(fields=["document_id"]), models.Index(fields=["passage_id"])]

    def __str__(self) -> str:
        return f"citation of passage #{self.passage_id}"


class MemoryEmbedding(models.Model):
    """The version's search index entry: its embedding and its BM25 terms, both derived from
    the masked text at remember time and erased with the version. Both are sealed under the
    version's data key (`sealed_with`), so destroying that key makes them unreadable too."""

    sealed_with = "memory"

    content_fields = frozenset({"vector", "terms"})
    content_digests: frozenset[str] = frozenset()
    metadata_fields = frozenset({"memory", "embedder_id", "dim", "terms_format"})

    memory = models.OneToOneField(MemoryVersion, on_delete=models.CASCADE, primary_key=True, related_name="embedding")
    embedder_id = models.CharField(max_length=40, db_index=True)
    dim = models.PositiveSmallIntegerField()
    vector = SealedField(codec="bytes")
    terms = SealedField(codec="text", default="", help_text="Space-separated recall tokens of the masked text, sealed.")
    terms_format = models.CharField(
        max_length=24,
        db_default="t1",
        help_text="How the terms were made (recall.tokenize.TERMS_FORMAT); `reembed` refreshes others.",
    )

    objects = SealedManager()

    class Meta:
        base_manager_name = "objects"

    def __str__(self) -> str:
        return f"embedding of #{self.memory_id} ({self.embedder_id})"


class RateLimitSlot(models.Model):
    """One slot a credential's rolling-hour budget admitted (embedded mode; Redis keeps sorted
    sets instead): a remember, in bucket "turn" a conversation turn, in bucket "read" a recall or list. Handed back
    (deleted) if
    the work it admitted fails; purged by the cascade sweep once older than the window. The row
    counts for the credential and for its member (`member_id`: the anti-cycling bound of
    memoryapp/ratelimit.py, which a revoked credential's slots keep charging)."""

    credential_id = models.BigIntegerField()
    member_id = models.BigIntegerField(null=True, blank=True)
    bucket = models.CharField(max_length=16, default="remember")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["credential_id", "bucket", "at"], name="memoryapp_slot_cred_bucket"),
            models.Index(fields=["member_id", "bucket", "at"], name="memoryapp_slot_member_bucket"),
        ]

    def __str__(self) -> str:
        return f"{self.bucket} slot of credential #{self.credential_id} at {self.at:%Y-%m-%dT%H:%M:%S}"


class AccessOperation(models.TextChoices):
    RECALL = "recall", "Recall"
    LIST = "list", "List"


class AccessSurface(LabelledChoices):
    REST = "rest", gettext_lazy("REST API")
    MCP = "mcp", gettext_lazy("MCP")


def _access_retention_start(now: datetime | None = None) -> datetime:
    """Access entries older than this (ACCESS_LOG_RETENTION_DAYS) are expired: read paths stop
    showing an entry at its expiry, before the sweep deletes it."""
    return (now or timezone.now()) - timedelta(days=settings.ACCESS_LOG_RETENTION_DAYS)


class AccessEntryQuerySet(models.QuerySet):
    def within_retention(self, now: datetime | None = None) -> AccessEntryQuerySet:
        return self.filter(at__gte=_access_retention_start(now))

    def past_retention(self, now: datetime | None = None) -> AccessEntryQuerySet:
        """What the access-log sweep deletes."""
        return self.filter(at__lt=_access_retention_start(now))

    def of_removed_members(self) -> AccessEntryQuerySet:
        """Entries of removed members: erasing their memories erased the entries listing them,
        so only an entry written by a read racing that erase can be here."""
        return self.filter(member__in=Member.objects.removed())

    def restrict(self, member: Member, action: str) -> AccessEntryQuerySet:
        """`core.restrict`. "view": the member's own unexpired entries. Never anyone else's,
        whatever the role (owners read counts per day: `access_log.daily_counts_for`)."""
        check_action(action)
        return self.filter(member=member).within_retention()


class AccessEntry(models.Model):
    """One agent read that returned memories (SPEC §8.1): when, which credential, which operation
    and surface, and which memory versions came back, as ids and version numbers. Never the
    query, never any text. Written by `memoryapp.reads` in the request itself, one statement
    (`memoryapp.access_log.record`: only versions still stored are listed).

    `memories` lists `{"id": version id, "v": version number}` in the order returned. When a
    listed memory is erased its reference is struck from the entry (`erased` counts them), and an
    entry left listing nothing is deleted (`memoryapp.access_log.strike_references`, called by
    `retention.erasure.erase_memories`), so no entry keeps an erased memory findable. On
    PostgreSQL a GIN index (jsonb_path_ops, migration 0006) finds the entries listing an id."""

    # The credential's name is something the member wrote: the admin shows ids and counts only.
    content_fields = frozenset({"credential_name"})
    content_digests: frozenset[str] = frozenset()
    metadata_fields = frozenset(
        {
            "id",
            "workspace",
            "member",
            "credential_ref",
            "operation",
            "surface",
            "at",
            "returned",
            "hidden",
            "erased",
            "memories",
        }
    )

    # The composite indexes below lead with these columns, so the foreign keys need none of their own.
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="access_entries", db_index=False)
    member = models.ForeignKey(Member, on_delete=models.CASCADE, related_name="access_entries", db_index=False)
    # A plain id, like the receipts' references: the entry states which credential read, and
    # deleting credentials (with their workspace) needs no scan of this table.
    credential_ref = models.BigIntegerField(help_text="The id of the credential that read.")
    credential_name = models.CharField(max_length=120, help_text="The credential's name at the time of the read.")
    operation = models.CharField(max_length=8, choices=AccessOperation.choices)
    surface = models.CharField(max_length=4, choices=AccessSurface.choices)
    at = models.DateTimeField(default=timezone.now)
    returned = models.PositiveSmallIntegerField(help_text="Memories the read returned.")
    hidden = models.PositiveIntegerField(
        default=0, help_text="Memories the read left out because a cited source is gone or unreadable."
    )
    erased = models.PositiveSmallIntegerField(
        default=0, help_text="Returned memories erased since (their references are struck)."
    )
    memories = models.JSONField(
        default=list, help_text='[{"id": version id, "v": version number}], in the order returned.'
    )

    objects = AccessEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "access entries"
        indexes = [
            models.Index(
                fields=["member", "-at", "-id"], name="access_by_member"
            ),  # the member's history, newest first
            models.Index(fields=["workspace", "at"], name="access_by_workspace"),  # owners' counts per day
            models.Index(fields=["at"], name="access_expiry"),  # ACCESS_LOG_RETENTION_DAYS sweep
        ]

    def __str__(self) -> str:
        return f"access entry #{self.pk} ({self.operation} via {self.surface})"

    @property
    def memory_ids(self) -> list[int]:
        return [int(ref["id"]) for ref in self.memories]
