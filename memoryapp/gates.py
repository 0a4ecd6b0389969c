"""SPEC §2: every agent operation passes these checks in this order; the first failure answers.

`admit()` runs rows 1–10 (the refusals that need no write). Rows 11 (rate limit) and 12 (the
5,000-version cap) consume or count stored state, so `actions.remember` runs them next, in that
order, inside its write. REST views and MCP tools call `admit()` and the actions; nothing else
decides who may do what.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from core import logs
from core.errors import ApiError, memory_disabled, plain_details, unauthenticated, validation_error
from core.jsontext import unpaired_surrogates
from governance.auth import find_credential, touch_credential
from governance.models import (
    AskHistorySettings,
    Collection,
    ContextSet,
    Credential,
    Document,
    Member,
    Passage,
    Workspace,
)
from governance.permissions import scope_allowed_for_role
from memoryapp import masking, metrics
from memoryapp.models import Citation, MemoryVersion
from memoryapp.schemas import BODIES

OPERATION_SCOPES = {
    "remember": "memory:write",
    "forget": "memory:write",
    "recall": "memory:read",
    "list": "memory:read",
}


@dataclass
class AgentContext:
    credential: Credential
    member: Member
    workspace: Workspace
    ask_history: AskHistorySettings
    context_set: ContextSet | None

    @property
    def bound(self) -> bool:
        return self.credential.context_set_id is not None


@dataclass
class MaskedContent:
    text: str
    details: list[str]
    kinds: list[str]


@dataclass
class Admission:
    ctx: AgentContext
    data: dict[str, Any]
    content: MaskedContent | None = None
    passages: list[Passage] = field(default_factory=list)
    # context-set scope for reads: (collection ids, document ids) or None when unbound
    scope: tuple[frozenset[int], frozenset[int]] | None = None


def admit(token: str | None, operation: str, body: Any) -> Admission:
    return admit_with(admit_agent(token, operation), operation, body)  # rows 1–5, then 6–10


def admit_with(ctx: AgentContext, operation: str, body: Any) -> Admission:
    """Rows 6–10 for an already admitted credential."""
    data = validate_body(operation, body)  # row 6
    refuse_personal_data_in_names(data)  # row 7
    admission = Admission(ctx=ctx, data=data)
    if ctx.bound:  # row 8
        admission.scope = context_set_scope(ctx)
    if operation == "remember":
        readable = readable_cited_passages(ctx, data.get("citations", []))
        admission.passages = list(readable.values())
        check_remember_in_scope(admission)  # row 8
        check_collection_readable(ctx, data.get("collectionId"))
        admission.passages = require_citations(data.get("citations", []), readable)  # row 9
        admission.content = mask_content(
            data["text"], data.get("details", []), region=ctx.ask_history.phone_region
        )  # row 10
    elif operation in ("recall", "list"):
        collection_id = data.get("collectionId")
        if admission.scope is not None and collection_id is not None and collection_id not in admission.scope[0]:
            raise scope_refused("The collection is outside this credential's context set.")
    return admission


# --- rows 1–5 ----------------------------------------------------------------------------------
def admit_agent(token: str | None, operation: str, *, switches: bool = True) -> AgentContext:
    """Rows 1–5. switches=False stops after row 4: conversation turns and reply usage judge the
    platform flag and the member's switch themselves (as skip reasons, SPEC §9), and are not
    governed by the owner's "Let agents keep memories" switch (credential-written memories)."""
    now = timezone.now()
    credential = find_credential(token)
    if credential is None:
        raise unauthenticated()
    logs.bind(credential_id=credential.pk, workspace_id=credential.workspace_id)  # the request line's ids
    member = credential.member
    # A credential ends with the membership period it was created in (SPEC §10): revoked at
    # removal, and refused even unrevoked once the member was re-added after it.
    # A deactivated account (the admin's is_active switch, or a deleted person's) opens nothing.
    if (
        not credential.is_usable(now)
        or not member.is_active
        or not member.user.is_active
        or member.workspace_id != credential.workspace_id
        or not member.issued_in_period(credential.created_at)
    ):
        raise unauthenticated("This credential is revoked, expired, or its member was removed from the workspace.")
    scope = OPERATION_SCOPES[operation]
    if scope not in credential.scopes:
        raise ApiError(403, "INSUFFICIENT_SCOPE", f"This credential lacks the {scope} scope.", {"requiredScope": scope})
    if not scope_allowed_for_role(scope, member.role):
        raise ApiError(
            403,
            "INSUFFICIENT_ROLE",
            f"The member's current role does not allow {scope}.",
            {"requiredScope": scope, "role": member.role},
        )
    workspace = credential.workspace
    if switches:
        check_memory_enabled(workspace, member, agent=True)
    else:
        check_retaining(workspace)
    touch_credential(credential)
    context_set = credential.context_set if credential.context_set_id else None  # loaded only when bound
    return AgentContext(
        credential=credential,
        member=member,
        workspace=workspace,
        ask_history=workspace.ask_history,
        context_set=context_set,
    )


def check_memory_enabled(workspace: Workspace, member: Member | None, *, agent: bool) -> None:
    """Rows 4–5, shared with the member's own AI-memory API (which skips the agents' owner switch)."""
    check_retaining(workspace)
    if not workspace.ai_memory_available:
        raise memory_disabled("organization", "AI memory is not enabled for your organization.")
    if agent and not workspace.ask_history.agent_memories_enabled:
        raise memory_disabled("workspace", "The workspace owner has not enabled agent memories.")
    if agent and member is not None and not member.remember_me:
        raise memory_disabled("member", "The member has turned off 'Let the assistant remember me'.")


def check_retaining(workspace: Workspace) -> None:
    """Row 4."""
    if not workspace.retains_history:
        raise ApiError(403, "NON_RETAINING_WORKSPACE", "This workspace keeps no history, so it keeps no memories.")


# --- row 6 -----------------------------------------------------------------------------------
def validate_body(operation: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise validation_error({"non_field_errors": ["The body must be a JSON object."]})
    not_text = unpaired_surrogates(body)  # REST bodies were refused at parsing; MCP arguments are judged here
    if not_text:
        raise validation_error(not_text)
    serializer = BODIES[operation](data=body)
    if not serializer.is_valid():
        raise validation_error(plain_details(serializer.errors))
    return dict(serializer.validated_data)


# --- row 7 -----------------------------------------------------------------------------------
def refuse_personal_data_in_names(data: dict[str, Any], *, identifiers: bool = True) -> None:
    """Refuse a namespace or key holding personal data; UUIDs and ULIDs in them are identifiers
    unless `identifiers` is False (see ``masking.name_kinds``)."""
    flagged = {
        name: list(kinds)
        for name in ("namespace", "key")
        if data.get(name) and (kinds := masking.name_kinds(data[name], identifiers=identifiers))
    }
    if flagged:
        # The kinds found, never the value: error details are logged and shown.
        raise ApiError(
            400,
            "AGENT_MEMORY_PERSONAL_DATA",
            "namespace and key are never masked, so they must not contain personal data.",
            {"fields": flagged},
        )


# --- row 8 -----------------------------------------------------------------------------------
def scope_refused(message: str) -> ApiError:
    return ApiError(403, "AGENT_CONTEXT_SET_SCOPE_REFUSED", message)


def context_set_scope(ctx: AgentContext) -> tuple[frozenset[int], frozenset[int]]:
    """The bound set's collections and listed documents; an inactive or deleted set refuses all."""
    context_set = ctx.context_set
    if context_set is None or not context_set.usable:
        raise scope_refused("This credential's context set is inactive or deleted.")
    collections = frozenset(context_set.collections.values_list("id", flat=True))
    documents = frozenset(context_set.documents.values_list("id", flat=True))
    return collections, documents


def in_scope_q(scope: tuple[frozenset[int], frozenset[int]], prefix: str = "") -> Q:
    """Memories inside a context set: collection in the set or cited, and every citation's
    document in the set (listed, or in a listed collection)."""
    collections, documents = scope
    set_documents = Q(document_id__in=documents) | Q(document_id__in=_documents_in_collections(collections))
    outside = Citation.objects.filter(memory_id=OuterRef(f"{prefix}pk")).exclude(set_documents)
    any_citation = Citation.objects.filter(memory_id=OuterRef(f"{prefix}pk"))
    return ~Exists(outside) & (
        Q(**{f"{prefix}collection_id__in": collections})
        | (Q(**{f"{prefix}collection_id__isnull": True}) & Exists(any_citation))
    )


def _documents_in_collections(collections: frozenset[int]) -> QuerySet[Document]:
    return Document.objects.filter(collection_id__in=collections).values("id")


def check_remember_in_scope(admission: Admission) -> None:
    if admission.scope is None:
        return
    collections, documents = admission.scope
    collection_id = admission.data.get("collectionId")
    if collection_id is None and not admission.data.get("citations"):
        raise scope_refused("A memory with neither a collection nor citations is outside the credential's context set.")
    if collection_id is not None and collection_id not in collections:
        raise scope_refused("The collection is outside this credential's context set.")
    # Only a passage the member can read can be shown to lie inside the set: a citation that is
    # missing or unreadable is outside it (row 8 before row 9), and both answer alike, so a
    # bound credential learns nothing about passages it cannot read.
    if len(admission.passages) != len(set(admission.data.get("citations", []))):
        raise scope_refused("A cited passage is outside this credential's context set.")
    for passage in admission.passages:
        if passage.document_id not in documents and passage.document.collection_id not in collections:
            raise scope_refused("A cited document is outside this credential's context set.")


def check_memory_in_scope(admission: Admission, memory_ids: list[int]) -> None:
    """forget: a memory outside the bound set is refused."""
    if admission.scope is None:
        return
    inside = MemoryVersion.objects.filter(pk__in=memory_ids).filter(in_scope_q(admission.scope)).count()
    if inside != len(memory_ids):
        raise scope_refused("This memory is outside the credential's context set.")


# --- row 9 -----------------------------------------------------------------------------------
def readable_cited_passages(ctx: AgentContext, wanted: list[int]) -> dict[int, Passage]:
    if not wanted:
        return {}
    return {
        passage.pk: passage
        for passage in Passage.objects.select_related("document").filter(
            pk__in=wanted,
            document__workspace_id=ctx.workspace.pk,
            document__in=Document.objects.restrict(ctx.member, "view"),
        )
    }


def require_citations(wanted: list[int], found: dict[int, Passage]) -> list[Passage]:
    missing = [str(pid) for pid in wanted if pid not in found]
    if missing:
        # Whether a passage is missing or merely unreadable is not revealed.
        raise ApiError(
            400,
            "AGENT_MEMORY_CITATION_INVALID",
            "A cited passage does not exist or is not readable by the member.",
            {"passageIds": missing},
        )
    return [found[pid] for pid in wanted]


def check_collection_readable(ctx: AgentContext, collection_id: int | None) -> None:
    if collection_id is None:
        return
    readable = Collection.objects.restrict(ctx.member, "view").filter(pk=collection_id).exists()
    if not readable:
        raise validation_error({"collectionId": ["No such collection."]})


# --- row 10 ----------------------------------------------------------------------------------
def mask_content(text: str, details: list[str], *, region: str | None = None) -> MaskedContent:
    """`text` and `details` masked; `region`: the workspace's (AskHistorySettings.phone_region)."""
    with masking.one_memory_budget():  # the text and its details share one masking budget
        masked = masking.mask(text, region)
        kinds = set(masked.kinds)
        masked_details = []
        for line in details:
            result = masking.mask(line, region)
            kinds.update(result.kinds)
            if not masking.is_effectively_empty(result.text):
                masked_details.append(result.text)
    metrics.masking_detected(kinds)
    if masking.is_effectively_empty(masked.text):
        raise ApiError(
            400,
            "AGENT_MEMORY_EMPTY",
            "Nothing is left of the text once personal data is masked.",
            {"masked": sorted(kinds)},
        )
    return MaskedContent(text=masked.text, details=masked_details, kinds=sorted(kinds))
