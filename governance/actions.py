"""Governance writes: workspaces, members, settings, credentials, knowledge. One transaction per
action; the audit event is written inside it; cascades are started on commit."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from governance import tokens
from governance.auth import CREDENTIAL_TOKEN_KIND, PERSONAL_TOKEN_KIND
from governance.knowledge import EntityMatcher, split_passages
from governance.models import (
    AskHistorySettings,
    AuditEvent,
    Collection,
    ContextSet,
    Credential,
    Document,
    DocumentVersion,
    Entity,
    Member,
    Passage,
    PersonalToken,
    Workspace,
)
from governance.permissions import MEMORY_SCOPES, Role, scope_allowed_for_role
from memoryapp.errors import ApiError, validation_error
from retention import cascades
from retention.models import Operation

User = get_user_model()


def actor_label(user) -> str:
    if user is None:
        return "system"
    return getattr(user, "email", "") or getattr(user, "username", "") or f"user #{user.pk}"


def audit(action: str, *, workspace: Workspace | None, actor=None, target: str = "", changes: dict | None = None, reason: str = "") -> AuditEvent:
    return AuditEvent.objects.create(
        workspace=workspace,
        workspace_ref=workspace.pk if workspace else None,
        actor=actor if getattr(actor, "pk", None) else None,
        actor_label=actor_label(actor),
        action=action,
        target=target,
        changes=changes or {},
        reason=reason,
    )


# --- users, workspaces, members --------------------------------------------------------------
def ensure_user(email: str, password: str | None = None):
    email = email.strip().lower()
    user, created = User.objects.get_or_create(username=email, defaults={"email": email})
    if password:
        user.set_password(password)
        user.save(update_fields=["password"])
    elif created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


@transaction.atomic
def create_workspace(name: str, *, owner_email: str, password: str | None = None, retains_history: bool = True, ai_memory_available: bool = True, actor=None) -> tuple[Workspace, Member]:
    workspace = Workspace.objects.create(name=name, retains_history=retains_history, ai_memory_available=ai_memory_available)
    AskHistorySettings.objects.create(workspace=workspace)
    owner = Member.objects.create(workspace=workspace, user=ensure_user(owner_email, password), role=Role.OWNER.label)
    audit("workspace.created", workspace=workspace, actor=actor, target=f"workspace #{workspace.pk}", changes={"name": name})
    return workspace, owner


@transaction.atomic
def add_member(workspace: Workspace, email: str, *, role: str, password: str | None = None, actor=None) -> Member:
    Role.parse(role)
    user = ensure_user(email, password)
    member, created = Member.objects.get_or_create(workspace=workspace, user=user, defaults={"role": role})
    if not created:
        if member.is_active:
            raise ApiError(409, "ALREADY_MEMBER", "This user is already a member of the workspace.")
        member.left_at = None
        member.role = role
        member.remember_me = True
        member.joined_at = timezone.now()
        member.save()
    audit("member.added", workspace=workspace, actor=actor, target=f"member #{member.pk}", changes={"role": role})
    return member


def _owners_left(workspace: Workspace, excluding: Member) -> int:
    return Member.objects.filter(workspace=workspace, role=Role.OWNER.label, left_at__isnull=True).exclude(pk=excluding.pk).count()


@transaction.atomic
def change_role(member: Member, role: str, *, actor) -> Member:
    try:
        Role.parse(role)
    except KeyError:
        raise validation_error({"role": [f"Must be one of {', '.join(r.label for r in Role)}."]}) from None
    member = Member.objects.select_for_update().get(pk=member.pk)
    if member.role == Role.OWNER.label and role != Role.OWNER.label and _owners_left(member.workspace, member) == 0:
        raise ApiError(409, "LAST_OWNER", "A workspace keeps at least one owner.")
    old = member.role
    member.role = role
    member.save(update_fields=["role"])
    audit("member.role_changed", workspace=member.workspace, actor=actor, target=f"member #{member.pk}", changes={"role": [old, role]})
    return member


@transaction.atomic
def remove_member(member: Member, *, actor) -> None:
    """The membership ends: its credentials stop at once (the gate checks membership) and its
    memories become unreachable now and are erased with a receipt on commit."""
    member = Member.objects.select_for_update().get(pk=member.pk)
    if member.role == Role.OWNER.label and _owners_left(member.workspace, member) == 0:
        raise ApiError(409, "LAST_OWNER", "A workspace keeps at least one owner.")
    member.left_at = timezone.now()
    member.save(update_fields=["left_at"])
    from memoryapp.models import MemoryVersion

    cascades.mark_unreachable(MemoryVersion.objects.filter(member=member), Operation.MEMBER_REMOVAL)
    audit("member.removed", workspace=member.workspace, actor=actor, target=f"member #{member.pk}", changes={"role": member.role})
    cascades.schedule_erase(member.workspace_id)


@transaction.atomic
def set_remember_me(member: Member, enabled: bool) -> Member:
    Member.objects.filter(pk=member.pk).update(remember_me=enabled)
    member.remember_me = enabled
    audit("member.remember_me", workspace=member.workspace, actor=member.user, target=f"member #{member.pk}", changes={"rememberMe": enabled})
    return member


# --- ask-history settings ----------------------------------------------------------------------
SETTINGS_FIELDS = {
    "agentMemoriesEnabled": "agent_memories_enabled",
    "agentMemoryRetentionDays": "agent_memory_retention_days",
    "expiredGraceDays": "expired_grace_days",
}


def settings_json(settings: AskHistorySettings) -> dict[str, Any]:
    return {
        "agentMemoriesEnabled": settings.agent_memories_enabled,
        "agentMemoryRetentionDays": settings.agent_memory_retention_days,
        "expiredGraceDays": settings.expired_grace_days,
        "retentionAppliesToExistingMemories": True,
    }


@transaction.atomic
def update_settings(workspace: Workspace, changes: dict[str, Any], *, actor) -> AskHistorySettings:
    settings = AskHistorySettings.objects.select_for_update().get(workspace=workspace)
    diff = {}
    for api_name, value in changes.items():
        field = SETTINGS_FIELDS[api_name]
        old = getattr(settings, field)
        if old != value:
            setattr(settings, field, value)
            diff[api_name] = [old, value]
    if diff:
        settings.save()
        audit("settings.changed", workspace=workspace, actor=actor, target="ask-history settings", changes=diff)
    return settings


# --- credentials -------------------------------------------------------------------------------
@transaction.atomic
def create_credential(member: Member, *, name: str, scopes: list[str], context_set: ContextSet | None = None, expires_at: datetime | None = None) -> tuple[Credential, str]:
    unknown = [s for s in scopes if s not in MEMORY_SCOPES]
    if unknown:
        raise validation_error({"scopes": [f"Unknown scope {s!r}." for s in unknown]})
    above = [s for s in scopes if not scope_allowed_for_role(s, member.role)]
    if above:
        raise ApiError(403, "INSUFFICIENT_ROLE", "A scope above your role cannot be granted.", {"scopes": above, "role": member.role})
    if expires_at is not None and expires_at <= timezone.now():
        raise validation_error({"expiresAt": ["Must be in the future."]})
    issued = tokens.issue(CREDENTIAL_TOKEN_KIND)
    credential = Credential.objects.create(
        workspace_id=member.workspace_id,
        member=member,
        name=name,
        scopes=sorted(set(scopes)),
        context_set=context_set,
        prefix=issued.prefix,
        token_hash=issued.token_hash,
        expires_at=expires_at,
    )
    audit("credential.created", workspace=member.workspace, actor=member.user, target=f"credential {credential.prefix}", changes={"name": name, "scopes": credential.scopes, "contextSetId": context_set.pk if context_set else None})
    return credential, issued.token


@transaction.atomic
def revoke_credential(credential: Credential, *, actor, reason: str = "") -> Credential:
    credential = Credential.objects.select_for_update().get(pk=credential.pk)
    if credential.revoked_at is None:
        credential.revoked_at = timezone.now()
        credential.save(update_fields=["revoked_at"])
        audit("credential.revoked", workspace=credential.workspace, actor=actor, target=f"credential {credential.prefix}", reason=reason)
    return credential


def issue_personal_token(user) -> str:
    issued = tokens.issue(PERSONAL_TOKEN_KIND)
    PersonalToken.objects.create(user=user, prefix=issued.prefix, token_hash=issued.token_hash)
    return issued.token


# --- knowledge ---------------------------------------------------------------------------------
@transaction.atomic
def create_collection(workspace: Workspace, *, name: str, restricted: bool = False, readers: list[Member] | None = None) -> Collection:
    collection = Collection.objects.create(workspace=workspace, name=name, restricted=restricted)
    if readers:
        collection.readers.set(readers)
    return collection


@transaction.atomic
def delete_collection(collection: Collection, *, actor) -> None:
    document_ids = list(collection.documents.values_list("pk", flat=True))
    cascades.mark_unreachable(cascades.dependents_of_collection(collection.workspace_id, collection.pk, document_ids), Operation.CASCADE_COLLECTION)
    audit("collection.deleted", workspace=collection.workspace, actor=actor, target=f"collection #{collection.pk}", changes={"documents": len(document_ids)})
    collection.delete()
    cascades.schedule_erase(collection.workspace_id)


def _link_entities(workspace_id: int, passages: list[Passage]) -> None:
    matcher = EntityMatcher.for_workspace(workspace_id)
    links = [Entity.passages.through(entity_id=entity_id, passage_id=p.pk) for p in passages for entity_id in matcher.find(p.text)]
    Entity.passages.through.objects.bulk_create(links, ignore_conflicts=True)


def _add_version(document: Document, text: str) -> DocumentVersion:
    number = (document.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    version = DocumentVersion.objects.create(document=document, number=number)
    passages = Passage.objects.bulk_create(
        Passage(version=version, document=document, position=i, text=chunk, sha256=Passage.hash_text(chunk)) for i, chunk in enumerate(split_passages(text))
    )
    if not passages or passages[0].pk is None:  # backends that do not return ids from bulk_create
        passages = list(version.passages.all())
    _link_entities(document.workspace_id, passages)
    document.current_version = version
    document.save(update_fields=["current_version"])
    return version


@transaction.atomic
def create_document(collection: Collection, *, title: str, text: str, expires_at: datetime | None = None) -> Document:
    document = Document.objects.create(workspace_id=collection.workspace_id, collection=collection, title=title, expires_at=expires_at)
    _add_version(document, text)
    return document


@transaction.atomic
def add_document_version(document: Document, *, text: str) -> DocumentVersion:
    document = Document.objects.select_for_update().get(pk=document.pk)
    return _add_version(document, text)


@transaction.atomic
def delete_document(document: Document, *, actor) -> None:
    cascades.mark_unreachable(cascades.dependents_of_documents(document.workspace_id, [document.pk]), Operation.CASCADE_DOCUMENT)
    audit("document.deleted", workspace=document.workspace, actor=actor, target=f"document #{document.pk}")
    document.delete()
    cascades.schedule_erase(document.workspace_id)


@transaction.atomic
def create_entity(workspace: Workspace, *, name: str, aliases: list[str]) -> Entity:
    entity = Entity.objects.create(workspace=workspace, name=name, aliases=aliases)
    matcher = EntityMatcher([entity])
    links = []
    for passage_id, text in Passage.objects.filter(document__workspace=workspace).values_list("pk", "text").iterator(chunk_size=2000):
        if matcher.find(text):
            links.append(Entity.passages.through(entity_id=entity.pk, passage_id=passage_id))
    Entity.passages.through.objects.bulk_create(links, ignore_conflicts=True)
    return entity


@transaction.atomic
def create_context_set(workspace: Workspace, *, name: str, collections: list[Collection], documents: list[Document], active: bool = True) -> ContextSet:
    context_set = ContextSet.objects.create(workspace=workspace, name=name, active=active)
    context_set.collections.set(collections)
    context_set.documents.set(documents)
    return context_set


@transaction.atomic
def set_context_set_active(context_set: ContextSet, active: bool, *, actor) -> ContextSet:
    context_set.active = active
    context_set.save(update_fields=["active"])
    audit("context_set.changed", workspace=context_set.workspace, actor=actor, target=f"context set #{context_set.pk}", changes={"active": active})
    return context_set


@transaction.atomic
def delete_context_set(context_set: ContextSet, *, actor) -> None:
    context_set.deleted_at = timezone.now()
    context_set.active = False
    context_set.save(update_fields=["deleted_at", "active"])
    audit("context_set.deleted", workspace=context_set.workspace, actor=actor, target=f"context set #{context_set.pk}")


# --- platform-level switches (platform admins) ---------------------------------------------------
@transaction.atomic
def set_ai_memory_available(workspace: Workspace, available: bool, *, actor, reason: str = "") -> Workspace:
    workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    if workspace.ai_memory_available != available:
        audit("workspace.ai_memory_available", workspace=workspace, actor=actor, target=f"workspace #{workspace.pk}", changes={"aiMemoryAvailable": [workspace.ai_memory_available, available]}, reason=reason)
        workspace.ai_memory_available = available
        workspace.save(update_fields=["ai_memory_available"])
    return workspace


@transaction.atomic
def set_retains_history(workspace: Workspace, retains: bool, *, actor, reason: str = "") -> Workspace:
    """Turning history off erases every memory of the workspace: unreachable now, erased with
    receipts on commit (and by the cascade sweep if the broker is down)."""
    from memoryapp.models import MemoryVersion

    workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    if workspace.retains_history != retains:
        audit("workspace.retains_history", workspace=workspace, actor=actor, target=f"workspace #{workspace.pk}", changes={"retainsHistory": [workspace.retains_history, retains]}, reason=reason)
        workspace.retains_history = retains
        workspace.save(update_fields=["retains_history"])
        if not retains:
            cascades.mark_unreachable(MemoryVersion.objects.filter(workspace=workspace), Operation.NON_RETAINING)
            cascades.schedule_erase(workspace.pk)
    return workspace


def delete_workspace(workspace: Workspace, *, actor, reason: str = "") -> int:
    """Erase every memory with receipts (kept: they hold no content), then delete the workspace."""
    from memoryapp.models import MemoryVersion

    with transaction.atomic():
        cascades.mark_unreachable(MemoryVersion.objects.filter(workspace=workspace), Operation.WORKSPACE_DELETION)
        audit("workspace.deleted", workspace=None, actor=actor, target=f"workspace #{workspace.pk}", changes={"name": workspace.name}, reason=reason)
    erased = cascades.erase_unreachable(workspace.pk, actor_label=actor_label(actor))
    workspace.delete()
    return erased


def erase_member_memories(member: Member, *, actor, reason: str = "") -> int:
    """A platform admin erases every memory of one member (with a receipt)."""
    from memoryapp.models import MemoryVersion
    from retention.erasure import erase_memories

    with transaction.atomic():
        ids = list(MemoryVersion.objects.filter(member=member).values_list("pk", flat=True))
        receipt = erase_memories(ids, operation=Operation.ADMIN_ERASE, workspace_id=member.workspace_id, member_id=member.pk, actor=actor, actor_label=actor_label(actor), filters={"member": member.pk, "reason": reason})
        audit("memories.admin_erased", workspace=member.workspace, actor=actor, target=f"member #{member.pk}", changes={"versions": receipt.versions_erased if receipt else 0}, reason=reason)
    return receipt.versions_erased if receipt else 0
