"""Governance writes: workspaces, members, settings, credentials, knowledge. One transaction per
action; the audit event is written inside it. Each action validates its own input and refuses
with the one error type (`ApiError`); views only translate HTTP.

Governance does not know what other apps keep about its objects: removing a member, deleting
knowledge or a workspace, or stopping history sends a `governance.signals` signal, and the apps
that keep dependent data react to it (retention erases the memories, SPEC §8).

Over ~400 lines on purpose: every governance write is here, one section per object (members,
accounts, settings, credentials, knowledge, platform switches), none over ~170 lines; a reader
looking for "where does governance change state" finds one file."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.errors import ApiError, memory_disabled, not_found, validation_error
from core.timestamps import iso
from governance import linking, signals, tokens
from governance.audit import Actor, audit
from governance.auth import CREDENTIAL_TOKEN_KIND, PERSONAL_TOKEN_KIND
from governance.knowledge import normalised_length, split_passages
from governance.models import (
    AskHistorySettings,
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

User = get_user_model()


# --- users, workspaces, members --------------------------------------------------------------
def ensure_user(email: str, password: str | None = None) -> AbstractBaseUser:
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
def create_workspace(
    name: str,
    *,
    owner_email: str,
    password: str | None = None,
    retains_history: bool = True,
    ai_memory_available: bool = True,
    actor: Actor = None,
) -> tuple[Workspace, Member]:
    workspace = Workspace.objects.create(
        name=name, retains_history=retains_history, ai_memory_available=ai_memory_available
    )
    AskHistorySettings.objects.create(workspace=workspace)
    owner = Member.objects.create(workspace=workspace, user=ensure_user(owner_email, password), role=Role.OWNER.label)
    audit(
        "workspace.created",
        workspace=workspace,
        actor=actor,
        target=f"workspace #{workspace.pk}",
        changes={"name": name},
    )
    return workspace, owner


@transaction.atomic
def add_member(
    workspace: Workspace, email: str, *, role: str, password: str | None = None, actor: Actor = None
) -> Member:
    Role.parse(role)
    user = ensure_user(email, password)
    member, created = Member.objects.get_or_create(workspace=workspace, user=user, defaults={"role": role})
    if not created:
        member = Member.objects.select_for_update().get(pk=member.pk)
        if member.is_active:
            raise ApiError(409, "ALREADY_MEMBER", "This user is already a member of the workspace.")
        # A new membership period on the same row: nothing issued before it opens it (the
        # credentials were revoked at removal; any left over are revoked here, and the gate and
        # `Member.opens_for` compare what remains with `joined_at`).
        member.left_at = None
        member.role = role
        member.remember_me = True
        member.joined_at = timezone.now()
        member.period += 1
        member.save()
        _revoke_credentials_of(
            member, at=member.joined_at, actor=actor, reason="issued in an earlier membership period"
        )
    audit(
        "member.added",
        workspace=workspace,
        actor=actor,
        target=f"member #{member.pk}",
        changes={"role": role, "period": member.period},
    )
    return member


def _owners_left(workspace: Workspace, excluding: Member) -> int:
    return Member.objects.active().filter(workspace=workspace, role=Role.OWNER.label).exclude(pk=excluding.pk).count()


@transaction.atomic
def change_role(member: Member, role: str, *, actor: Actor) -> Member:
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
    audit(
        "member.role_changed",
        workspace=member.workspace,
        actor=actor,
        target=f"member #{member.pk}",
        changes={"role": [old, role]},
    )
    return member


def _revoke_credentials_of(member: Member, *, at: datetime, actor: Actor, reason: str) -> int:
    """Revoke every credential of the membership not yet revoked, one audit event each (as a
    member's own revocation writes), inside the caller's transaction."""
    revoked = 0
    for credential in Credential.objects.not_revoked().select_for_update().filter(member=member).order_by("id"):
        credential.revoked_at = at
        credential.save(update_fields=["revoked_at"])
        audit(
            "credential.revoked",
            workspace=member.workspace,
            actor=actor,
            target=f"credential {credential.prefix}",
            reason=reason,
        )
        revoked += 1
    return revoked


def _end_membership(member: Member, *, actor: Actor, reason: str = "") -> Member:
    member.left_at = timezone.now()
    member.save(update_fields=["left_at"])
    revoked = _revoke_credentials_of(
        member, at=member.left_at, actor=actor, reason="membership ended" + (f": {reason}" if reason else "")
    )
    signals.member_removed.send(sender=Member, member=member)
    audit(
        "member.removed",
        workspace=member.workspace,
        actor=actor,
        target=f"member #{member.pk}",
        changes={"role": member.role, "credentialsRevoked": revoked},
        reason=reason,
    )
    return member


@transaction.atomic
def remove_member(member: Member, *, actor: Actor) -> None:
    """The membership ends: every credential of it is revoked in this transaction (the gate also
    checks membership), and what other apps keep about the member goes with it
    (`signals.member_removed`)."""
    member = Member.objects.select_for_update().get(pk=member.pk)
    if member.role == Role.OWNER.label and _owners_left(member.workspace, member) == 0:
        raise ApiError(409, "LAST_OWNER", "A workspace keeps at least one owner.")
    _end_membership(member, actor=actor)


def end_memberships_of_deleted_user(user: AbstractBaseUser, *, actor: Actor = None) -> int:
    """Before a user row goes (`user.delete()` or a queryset delete, from any code or shell: a
    `pre_delete` receiver calls this; the admin refuses to delete a member's account): every
    active membership ends as a removal does, the last owner's too
    (the account is going; a platform admin adds another owner), every personal token is revoked,
    and every app erases what it keeps about each membership now (`signals.member_deleting`),
    with receipts, because the member rows go with the user. Safe to call twice."""
    ended = 0
    with transaction.atomic():
        for member in (
            Member.objects.active().select_for_update().filter(user=user).select_related("workspace").order_by("id")
        ):
            _end_membership(member, actor=actor, reason="user deleted")
            ended += 1
        for token in PersonalToken.objects.active().select_for_update().filter(user=user).order_by("id"):
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit(
                "personal_token.revoked",
                workspace=None,
                actor=actor,
                target=f"personal token {token.prefix}",
                changes={"userId": user.pk},
                reason="user deleted",
            )
    for member in Member.objects.filter(user=user).select_related("workspace").order_by("id"):
        signals.member_deleting.send(sender=Member, member=member, actor=actor)
    return ended


def on_user_deleting(sender: type, instance: AbstractBaseUser, **kwargs: Any) -> None:
    """`pre_delete` receiver for the user model (connected in `GovernanceConfig.ready()`): a
    user deleted by any path ends their memberships first. Audit events name no actor here: the
    row they would point to is being deleted."""
    end_memberships_of_deleted_user(instance, actor=None)


@transaction.atomic
def set_remember_me(member: Member, enabled: bool) -> Member:
    """The member's "Let the assistant remember me" switch; it cannot be switched while the
    platform has AI memory off for the organization (the page shows it disabled)."""
    if not member.workspace.ai_memory_available:
        raise memory_disabled("organization", "AI memory is not enabled for your organization.")
    Member.objects.filter(pk=member.pk).update(remember_me=enabled)
    member.remember_me = enabled
    audit(
        "member.remember_me",
        workspace=member.workspace,
        actor=member.user,
        target=f"member #{member.pk}",
        changes={"rememberMe": enabled},
    )
    return member


# --- accounts --------------------------------------------------------------------------------------
#: Audit events about a person's account that the person sees (Settings → Agent access).
ADMIN_SET_PASSWORD = "account.password_set_by_admin"
ACCOUNT_NOTICES = (ADMIN_SET_PASSWORD,)


def account_target(user: AbstractBaseUser) -> str:
    return f"user #{user.pk}"


def record_password_set_by_admin(user: AbstractBaseUser, *, actor: Actor, reason: str = "") -> None:
    """An administrator set (or disabled) the account's password: recorded for the account's
    owner to see, whether or not they are a member yet (an account an admin prepared may join a
    workspace later). Written in the transaction that changed the password."""
    audit(
        ADMIN_SET_PASSWORD,
        workspace=None,
        actor=actor,
        target=account_target(user),
        changes={"userId": user.pk, "usablePassword": user.has_usable_password()},
        reason=reason,
    )


# --- ask-history settings ----------------------------------------------------------------------
def settings_json(ask_history: AskHistorySettings) -> dict[str, Any]:
    return {**ask_history.api_values(), "retentionAppliesToExistingMemories": True}


@transaction.atomic
def update_settings(workspace: Workspace, changes: dict[str, Any], *, actor: Actor) -> AskHistorySettings:
    ask_history = AskHistorySettings.objects.select_for_update().get(workspace=workspace)
    diff = {}
    for api_name, value in changes.items():
        field = AskHistorySettings.API_FIELDS[api_name]
        old = getattr(ask_history, field)
        if old != value:
            setattr(ask_history, field, value)
            diff[api_name] = [old, value]
    if diff:
        ask_history.save()
        audit("settings.changed", workspace=workspace, actor=actor, target="ask-history settings", changes=diff)
    return ask_history


def member_json(member: Member) -> dict[str, Any]:
    """A member as the workspace API shows it (the member's export adds `rememberMe`)."""
    return {"id": str(member.pk), "email": member.user.email, "role": member.role, "joinedAt": iso(member.joined_at)}


# --- credentials -------------------------------------------------------------------------------
def credential_json(credential: Credential) -> dict[str, Any]:
    """A credential's metadata (the workspace API and the member's export): never the token (it
    was never stored) nor its hash."""
    return {
        "id": str(credential.pk),
        "name": credential.name,
        "prefix": credential.prefix,
        "scopes": list(credential.scopes),
        "contextSetId": str(credential.context_set_id) if credential.context_set_id else None,
        "createdAt": iso(credential.created_at),
        "lastUsedAt": iso(credential.last_used_at),
        "expiresAt": iso(credential.expires_at),
        "revokedAt": iso(credential.revoked_at),
    }


CREDENTIAL_LIMIT_REACHED = "CREDENTIAL_LIMIT_REACHED"


@transaction.atomic
def create_credential(
    member: Member,
    *,
    name: str,
    scopes: list[str],
    context_set: ContextSet | None = None,
    context_set_id: int | None = None,
    expires_at: datetime | None = None,
) -> tuple[Credential, str]:
    """A credential of `member` for agents; the token is returned once and stored as a hash. The
    bound context set (given, or named by `context_set_id`) must be a live set of the workspace."""
    if context_set_id is not None:
        context_set = ContextSet.objects.filter(pk=context_set_id).first()
    if (context_set_id is not None or context_set is not None) and (
        context_set is None or context_set.workspace_id != member.workspace_id or context_set.is_deleted
    ):
        raise validation_error({"contextSetId": ["No such context set."]})
    unknown = [s for s in scopes if s not in MEMORY_SCOPES]
    if unknown:
        raise validation_error({"scopes": [f"Unknown scope {s!r}." for s in unknown]})
    above = [s for s in scopes if not scope_allowed_for_role(s, member.role)]
    if above:
        raise ApiError(
            403,
            "INSUFFICIENT_ROLE",
            "A scope above your role cannot be granted.",
            {"scopes": above, "role": member.role},
        )
    if expires_at is not None and expires_at <= timezone.now():
        raise validation_error({"expiresAt": ["Must be in the future."]})
    # Each credential carries its own remember and read budgets (SPEC §4.7), so their number is
    # capped too, counted under the member's row lock (exact when two are created at once).
    Member.objects.select_for_update().filter(pk=member.pk).exists()
    limit = settings.MAX_CREDENTIALS_PER_MEMBER
    if Credential.objects.filter(member=member).active().count() >= limit:
        raise ApiError(
            409,
            CREDENTIAL_LIMIT_REACHED,
            f"At most {limit} usable credentials per member: revoke one first.",
            {"limit": limit},
        )
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
    audit(
        "credential.created",
        workspace=member.workspace,
        actor=member.user,
        target=f"credential {credential.prefix}",
        changes={"name": name, "scopes": credential.scopes, "contextSetId": context_set.pk if context_set else None},
    )
    return credential, issued.token


@transaction.atomic
def revoke_credential(credential: Credential, *, actor: Actor, reason: str = "") -> Credential:
    credential = Credential.objects.select_for_update().get(pk=credential.pk)
    if not credential.is_revoked:
        credential.revoked_at = timezone.now()
        credential.save(update_fields=["revoked_at"])
        audit(
            "credential.revoked",
            workspace=credential.workspace,
            actor=actor,
            target=f"credential {credential.prefix}",
            reason=reason,
        )
    return credential


def issue_personal_token(user: AbstractBaseUser) -> str:
    issued = tokens.issue(PERSONAL_TOKEN_KIND)
    PersonalToken.objects.create(user=user, prefix=issued.prefix, token_hash=issued.token_hash)
    return issued.token


# --- knowledge ---------------------------------------------------------------------------------
@transaction.atomic
def create_collection(
    workspace: Workspace,
    *,
    name: str,
    restricted: bool = False,
    readers: list[Member] | None = None,
    reader_ids: list[int] | None = None,
    creator: Member | None = None,
) -> Collection:
    """Every reader (given as members, or as the ids a request named) must be an active member
    of the workspace, or nothing is created (400 naming `memberIds`). Whoever restricts a
    collection keeps reading it: the creating member is always a reader."""
    readers = list(readers or [])
    if reader_ids:
        found = list(Member.objects.active().filter(workspace=workspace, pk__in=reader_ids))
        if len(found) != len(set(reader_ids)):
            raise validation_error({"memberIds": ["Every id must be an active member of this workspace."]})
        readers.extend(found)
    if any(reader.workspace_id != workspace.pk or not reader.is_active for reader in readers):
        raise validation_error({"memberIds": ["Every id must be an active member of this workspace."]})
    if restricted and creator is not None and creator not in readers:
        readers.append(creator)
    collection = Collection.objects.create(workspace=workspace, name=name, restricted=restricted)
    if readers:
        collection.readers.set(readers)
    return collection


def _collection_read_by(member: Member, collection: Collection | None, collection_id: int | None) -> Collection | None:
    """The collection (given, or named by `collection_id`) if `member` may read it, else None."""
    return (
        Collection.objects.restrict(member, "view")
        .filter(pk=collection.pk if collection is not None else collection_id)
        .first()
    )


@transaction.atomic
def delete_collection(
    collection: Collection | None = None, *, actor: Actor, collection_id: int | None = None, by: Member | None = None
) -> None:
    """`by`: the member deleting it, who must read the collection (given, or named by
    `collection_id`): one they cannot read is not found (404), like one that does not exist."""
    if by is not None:
        collection = _collection_read_by(by, collection, collection_id)
        if collection is None:
            raise not_found("collection")
    elif collection is None:
        raise TypeError("delete_collection: a collection, or a collection_id and the member `by` who reads it")
    document_ids = list(
        Document.objects.select_for_update().filter(collection=collection).order_by("pk").values_list("pk", flat=True)
    )  # see delete_document
    signals.documents_deleting.send(
        sender=Collection, workspace_id=collection.workspace_id, document_ids=document_ids, collection_id=collection.pk
    )
    audit(
        "collection.deleted",
        workspace=collection.workspace,
        actor=actor,
        target=f"collection #{collection.pk}",
        changes={"documents": len(document_ids)},
    )
    collection.delete()


PASSAGE_VOLUME_LIMIT_REACHED = "PASSAGE_VOLUME_LIMIT_REACHED"


def _reserve_passage_volume(workspace_id: int, adding: int) -> None:
    """Inside the ingest's transaction, under the workspace's row lock (exact when two documents
    are added at once): the workspace's passages stay within MAX_PASSAGE_CHARS_PER_WORKSPACE
    characters after NFKC — what every new entity scans and every recall's entity hop reads."""
    Workspace.objects.select_for_update().filter(pk=workspace_id).exists()
    limit, used = settings.MAX_PASSAGE_CHARS_PER_WORKSPACE, linking.workspace_passage_chars(workspace_id)
    if used + adding > limit:
        raise ApiError(
            409,
            PASSAGE_VOLUME_LIMIT_REACHED,
            f"The workspace's documents may hold {limit} characters of passages in all (after Unicode NFKC "
            "normalisation); delete documents to make room.",
            {"limit": limit, "used": used, "adding": adding},
        )


def _passages(text: str) -> list[tuple[str, int]]:
    """The text's passages with their normalised lengths: computed before the write transaction."""
    return [(chunk, normalised_length(chunk)) for chunk in split_passages(text)]


def _add_version(document: Document, passages: list[tuple[str, int]]) -> DocumentVersion:
    """Inside the caller's transaction: the version and its passages, pending their entity links
    (`governance.linking`, after the commit)."""
    _reserve_passage_volume(document.workspace_id, sum(chars for _, chars in passages))
    number = (document.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    version = DocumentVersion.objects.create(document=document, number=number)
    Passage.objects.bulk_create(
        Passage(
            version=version,
            document=document,
            position=i,
            text=chunk,
            sha256=Passage.hash_text(chunk),
            chars=chars,
            links_pending=True,
        )
        for i, (chunk, chars) in enumerate(passages)
    )
    document.current_version = version
    document.save(update_fields=["current_version"])
    return version


def create_document(
    collection: Collection | None = None,
    *,
    title: str,
    text: str,
    expires_at: datetime | None = None,
    collection_id: int | None = None,
    by: Member | None = None,
) -> Document:
    """`by`: the member adding it, who must read the collection (given, or named by
    `collection_id`), or nothing is created (400 naming `collectionId`, whether it is missing,
    another workspace's or restricted). Without `by` (seeding, the forgetting check) the given
    collection is trusted. The workspace's passage volume is capped (409
    PASSAGE_VOLUME_LIMIT_REACHED). Entity links are written after the commit (`governance.linking`)."""
    passages = _passages(text)
    with transaction.atomic():
        if by is not None:
            collection = _collection_read_by(by, collection, collection_id)
            if collection is None:
                raise validation_error({"collectionId": ["No such collection."]})
        elif collection is None:
            raise TypeError("create_document: a collection, or a collection_id and the member `by` who reads it")
        document = Document.objects.create(
            workspace_id=collection.workspace_id, collection=collection, title=title, expires_at=expires_at
        )
        version = _add_version(document, passages)
    linking.start_linking(document.workspace_id, version_id=version.pk)
    return document


def add_document_version(document: Document, *, text: str) -> DocumentVersion:
    passages = _passages(text)
    with transaction.atomic():
        document = Document.objects.select_for_update().get(pk=document.pk)
        version = _add_version(document, passages)
    linking.start_linking(document.workspace_id, version_id=version.pk)
    return version


@transaction.atomic
def delete_document(document: Document, *, actor: Actor) -> None:
    Document.objects.select_for_update().filter(
        pk=document.pk
    ).exists()  # after a link chunk writing for it (governance.linking)
    signals.documents_deleting.send(
        sender=Document, workspace_id=document.workspace_id, document_ids=[document.pk], collection_id=None
    )
    audit("document.deleted", workspace=document.workspace, actor=actor, target=f"document #{document.pk}")
    document.delete()


ENTITY_LIMIT_REACHED = "ENTITY_LIMIT_REACHED"


def create_entity(workspace: Workspace, *, name: str, aliases: list[str]) -> Entity:
    """A named entity (SPEC §5.1), linked to every passage of the workspace that mentions it.
    At most `MAX_ENTITIES_PER_WORKSPACE` entities and `MAX_ENTITY_FORMS_PER_WORKSPACE` names
    plus aliases per workspace, counted under the workspace's row lock (exact under concurrency):
    every recall and ingestion matches text against all of them, and every process rebuilds its
    matcher after a change, at a cost that grows with the forms. The entity commits first; its
    passages are scanned after, outside the write transaction (`governance.linking`): at once
    when the workspace's passages are few, else by a task (`entity.links_status` "pending")."""
    with transaction.atomic():
        Workspace.objects.select_for_update().filter(pk=workspace.pk).exists()
        existing = Entity.objects.filter(workspace=workspace)
        limit, forms_limit = settings.MAX_ENTITIES_PER_WORKSPACE, settings.MAX_ENTITY_FORMS_PER_WORKSPACE
        if existing.count() >= limit:
            raise ApiError(409, ENTITY_LIMIT_REACHED, f"The workspace already has {limit} entities.", {"limit": limit})
        if existing.surface_form_count() + 1 + len(aliases) > forms_limit:
            raise ApiError(
                409,
                ENTITY_LIMIT_REACHED,
                f"The workspace's entities may have {forms_limit} names and aliases in all.",
                {"formsLimit": forms_limit},
            )
        entity = Entity.objects.create(workspace=workspace, name=name, aliases=aliases, link_cursor=0)
    if linking.start_linking(workspace.pk, entity_id=entity.pk):
        entity.link_cursor = None
    return entity


@transaction.atomic
def create_context_set(
    workspace: Workspace,
    *,
    name: str,
    collections: list[Collection] | None = None,
    documents: list[Document] | None = None,
    collection_ids: list[int] | None = None,
    document_ids: list[int] | None = None,
    active: bool = True,
    by: Member | None = None,
) -> ContextSet:
    """`by`: the member creating it, who must read every collection and document (given, or named
    by ids; an id named twice counts once) in this workspace, or nothing is created: 400 naming
    `collectionIds` (checked first), else `documentIds` — an expired document is not readable.
    Without `by` (seeding, tests) the given rows are trusted."""
    if by is not None:
        wanted_collections = set(collection_ids) if collection_ids is not None else {c.pk for c in collections or ()}
        wanted_documents = set(document_ids) if document_ids is not None else {d.pk for d in documents or ()}
        collections = list(
            Collection.objects.restrict(by, "view").filter(workspace_id=workspace.pk, pk__in=wanted_collections)
        )
        documents = list(
            Document.objects.restrict(by, "view").filter(workspace_id=workspace.pk, pk__in=wanted_documents)
        )
        if len(collections) != len(wanted_collections):
            raise validation_error({"collectionIds": ["No such collection."]})
        if len(documents) != len(wanted_documents):
            raise validation_error({"documentIds": ["No such document."]})
    elif collection_ids is not None or document_ids is not None:
        raise TypeError("create_context_set: ids need the member `by` who reads them")
    context_set = ContextSet.objects.create(workspace=workspace, name=name, active=active)
    context_set.collections.set(collections or [])
    context_set.documents.set(documents or [])
    return context_set


@transaction.atomic
def set_context_set_active(context_set: ContextSet, active: bool, *, actor: Actor) -> ContextSet:
    context_set.active = active
    context_set.save(update_fields=["active"])
    audit(
        "context_set.changed",
        workspace=context_set.workspace,
        actor=actor,
        target=f"context set #{context_set.pk}",
        changes={"active": active},
    )
    return context_set


@transaction.atomic
def delete_context_set(context_set: ContextSet, *, actor: Actor) -> None:
    context_set.deleted_at = timezone.now()
    context_set.active = False
    context_set.save(update_fields=["deleted_at", "active"])
    audit("context_set.deleted", workspace=context_set.workspace, actor=actor, target=f"context set #{context_set.pk}")


# --- platform-level switches (platform admins) ---------------------------------------------------
@transaction.atomic
def rename_workspace(workspace: Workspace, name: str, *, actor: Actor) -> Workspace:
    workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    if workspace.name != name:
        audit(
            "workspace.renamed",
            workspace=workspace,
            actor=actor,
            target=f"workspace #{workspace.pk}",
            changes={"name": [workspace.name, name]},
        )
        workspace.name = name
        workspace.save(update_fields=["name"])
    return workspace


@transaction.atomic
def set_ai_memory_available(workspace: Workspace, available: bool, *, actor: Actor, reason: str = "") -> Workspace:
    workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    if workspace.ai_memory_available != available:
        audit(
            "workspace.ai_memory_available",
            workspace=workspace,
            actor=actor,
            target=f"workspace #{workspace.pk}",
            changes={"aiMemoryAvailable": [workspace.ai_memory_available, available]},
            reason=reason,
        )
        workspace.ai_memory_available = available
        workspace.save(update_fields=["ai_memory_available"])
    return workspace


@transaction.atomic
def set_retains_history(workspace: Workspace, retains: bool, *, actor: Actor, reason: str = "") -> Workspace:
    """Turning history off erases every memory of the workspace (`signals.history_stopped`:
    unreachable now, erased with receipts on commit, or by the cascade sweep if the broker is down)."""
    workspace = Workspace.objects.select_for_update().get(pk=workspace.pk)
    if workspace.retains_history != retains:
        audit(
            "workspace.retains_history",
            workspace=workspace,
            actor=actor,
            target=f"workspace #{workspace.pk}",
            changes={"retainsHistory": [workspace.retains_history, retains]},
            reason=reason,
        )
        workspace.retains_history = retains
        workspace.save(update_fields=["retains_history"])
        if not retains:
            signals.history_stopped.send(sender=Workspace, workspace=workspace)
    return workspace


def delete_workspace(workspace: Workspace, *, actor: Actor, reason: str = "") -> int:
    """Every app first erases what it keeps about the workspace (`signals.workspace_deleting`:
    memories with receipts, which are kept, since they hold no content), then the workspace goes.
    Answers how many memory versions were erased."""
    erased = sum(
        count
        for _, count in signals.workspace_deleting.send(sender=Workspace, workspace=workspace, actor=actor)
        if isinstance(count, int)
    )
    with transaction.atomic():
        audit(
            "workspace.deleted",
            workspace=None,
            actor=actor,
            target=f"workspace #{workspace.pk}",
            changes={"name": workspace.name},
            reason=reason,
        )
        workspace.delete()
    return erased
