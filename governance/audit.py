"""Who did what: the audit event written inside the transaction of every governed change, and the
one way an actor is named in audit events, receipts and ledger entries (SPEC §10).

A leaf module: actions of every app call it, and it imports nothing above the models."""

from __future__ import annotations

from typing import Any, TypeAlias

from django.contrib.auth.base_user import AbstractBaseUser

from governance.models import AuditEvent, Credential, Workspace

#: Who acts: a person (a member's user or a platform admin), an agent credential, or the system.
Actor: TypeAlias = AbstractBaseUser | Credential | None


def actor_label(actor: Actor) -> str:
    if actor is None:
        return "system"
    if isinstance(actor, Credential):
        return f"credential {actor.prefix} of member #{actor.member_id}"
    return getattr(actor, "email", "") or getattr(actor, "username", "") or f"user #{actor.pk}"


def audit(
    action: str,
    *,
    workspace: Workspace | None,
    actor: Actor = None,
    target: str = "",
    changes: dict[str, Any] | None = None,
    reason: str = "",
) -> AuditEvent:
    return AuditEvent.objects.create(
        workspace=workspace,
        workspace_ref=workspace.pk if workspace else None,
        actor=actor if isinstance(actor, AbstractBaseUser) and actor.pk else None,
        actor_label=actor_label(actor),
        action=action,
        target=target,
        changes=changes or {},
        reason=reason,
    )
