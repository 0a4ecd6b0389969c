"""Quotas (SPEC §9): how many credits a member, or the members of one role together, may use per
calendar day, ISO week or month; their periods, the owner's writes (audited) and their JSON."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.timestamps import iso
from credits.models import MemberQuota, QuotaPeriod, RoleQuota
from credits.pricing import ZERO, money
from governance.audit import Actor, audit
from governance.models import Member, Workspace


def period_start(period: str, now: datetime) -> datetime:
    """Start (UTC) of the calendar day, ISO week (Monday) or month containing `now`."""
    day = now.astimezone(UTC).date()
    if period == QuotaPeriod.DAY:
        start = day
    elif period == QuotaPeriod.WEEK:
        start = day - timedelta(days=day.weekday())
    elif period == QuotaPeriod.MONTH:
        start = day.replace(day=1)
    else:
        raise ValueError(f"unknown quota period {period!r}")
    return datetime(start.year, start.month, start.day, tzinfo=UTC)


def period_end(period: str, start: datetime) -> datetime:
    if period == QuotaPeriod.DAY:
        return start + timedelta(days=1)
    if period == QuotaPeriod.WEEK:
        return start + timedelta(days=7)
    days = calendar.monthrange(start.year, start.month)[1]
    return start + timedelta(days=days)


def effective_used(quota: MemberQuota | RoleQuota, now: datetime) -> Decimal:
    """What the quota has used in the current period; a period the reset job has not rolled
    yet counts as fresh, so a late job never blocks (or un-blocks) anyone."""
    if quota.period_start < period_start(quota.period, now):
        return ZERO
    return quota.used


def roll_if_due(quota: MemberQuota | RoleQuota, now: datetime) -> None:
    """Called with the quota row locked."""
    current = period_start(quota.period, now)
    if quota.period_start < current:
        quota.used = ZERO
        quota.period_start = current


def _set_quota(
    model: type[MemberQuota] | type[RoleQuota],
    owner: dict[str, Any],
    *,
    limit: Decimal,
    period: str,
    actor: Actor,
    workspace: Workspace,
    action: str,
    target: str,
) -> MemberQuota | RoleQuota:
    """Create or change the quota row `owner` names, under its row lock; a new period starts now,
    an unchanged one keeps what it has used (after rolling it if it is due)."""
    limit = money(limit)
    if limit < ZERO:
        raise ValueError("a quota limit must not be negative")
    now = timezone.now()
    with transaction.atomic():
        quota = model.objects.select_for_update().filter(**owner).first()
        old = {"limit": str(quota.limit), "period": quota.period} if quota else None
        if quota is None:
            quota = model.objects.create(**owner, limit=limit, period=period, period_start=period_start(period, now))
        else:
            roll_if_due(quota, now)
            if quota.period != period:
                quota.period, quota.period_start = period, period_start(period, now)
            quota.limit = limit
            quota.save()
        audit(
            action,
            workspace=workspace,
            actor=actor,
            target=target,
            changes={"old": old, "new": {"limit": str(limit), "period": period}},
        )
    return quota


def _delete_quota(
    model: type[MemberQuota] | type[RoleQuota],
    owner: dict[str, Any],
    *,
    actor: Actor,
    workspace: Workspace,
    action: str,
    target: str,
) -> bool:
    with transaction.atomic():
        deleted, _ = model.objects.filter(**owner).delete()
        if deleted:
            audit(action, workspace=workspace, actor=actor, target=target)
    return bool(deleted)


def set_member_quota(member: Member, *, limit: Decimal, period: str, actor: Actor) -> MemberQuota:
    return _set_quota(
        MemberQuota,
        {"member": member},
        limit=limit,
        period=period,
        actor=actor,
        workspace=member.workspace,
        action="credits.member_quota_set",
        target=f"member #{member.pk}",
    )


def delete_member_quota(member: Member, *, actor: Actor) -> bool:
    return _delete_quota(
        MemberQuota,
        {"member": member},
        actor=actor,
        workspace=member.workspace,
        action="credits.member_quota_removed",
        target=f"member #{member.pk}",
    )


def set_role_quota(workspace: Workspace, role: str, *, limit: Decimal, period: str, actor: Actor) -> RoleQuota:
    return _set_quota(
        RoleQuota,
        {"workspace": workspace, "role": role},
        limit=limit,
        period=period,
        actor=actor,
        workspace=workspace,
        action="credits.role_quota_set",
        target=f"role {role}",
    )


def delete_role_quota(workspace: Workspace, role: str, *, actor: Actor) -> bool:
    return _delete_quota(
        RoleQuota,
        {"workspace": workspace, "role": role},
        actor=actor,
        workspace=workspace,
        action="credits.role_quota_removed",
        target=f"role {role}",
    )


def quota_json(quota: MemberQuota | RoleQuota, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    used = effective_used(quota, now)
    start = max(quota.period_start, period_start(quota.period, now))
    return {
        "limit": str(quota.limit),
        "used": str(used),
        "remaining": str(max(quota.limit - used, ZERO)),
        "period": quota.period,
        "periodStart": iso(start),
        "periodEnd": iso(period_end(quota.period, start)),
    }
