"""Credits (SPEC §9): prices, balances, quotas, charging, settlement, roll-ups, reconciliation.

Money is `Decimal`, never float. Every charge locks rows in one fixed order — the workspace's
credit account, then the member's quota, then the role's quota — inside the transaction that
writes the usage record, so parallel charges serialise on the account row and can never overdraw.

Invariant (checked by `reconcile_credits`):
    balance == Σ ledger amounts − Σ cost of pending usage records
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django.db import transaction
from django.db.models import Count, DecimalField, F, OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone
from django.utils.translation import gettext_noop

from core.chunks import run_in_chunks
from core.errors import ApiError
from core.timestamps import iso
from governance.audit import Actor, actor_label, audit
from governance.models import Member, Workspace
from retention.models import (
    CREDIT_DIGITS,
    CREDIT_PLACES,
    CreditAccount,
    LedgerEntry,
    LedgerKind,
    MemberQuota,
    ModelPrice,
    QuotaPeriod,
    RoleQuota,
    UsageCategory,
    UsageRecord,
    UsageRollup,
    UsageStatus,
)

QUANTUM = Decimal(1).scaleb(-CREDIT_PLACES)  # 0.000001
ZERO = Decimal("0")
MAX_CREDITS = Decimal(10) ** (CREDIT_DIGITS - CREDIT_PLACES) - 1

#: Used when the configured system model has no row in the price table yet; the row is then
#: created with these values so that platform admins see (and can change) what is charged.
DEFAULT_SYSTEM_MODEL_PRICE = (Decimal("0.010000"), Decimal("0.030000"))

#: Skip/refusal reasons shared by the consolidation answer, the Consolidation row and the API.
REASON_CREDITS = "credits"
REASON_MEMBER_QUOTA = "member_quota"
REASON_ROLE_QUOTA = "role_quota"

#: The input/output line labels of a usage record, in English (the API) and as message ids that
#: pages translate.
LINE_LABELS = {
    UsageCategory.AI_MEMORY: (gettext_noop("AI memory (input)"), gettext_noop("AI memory (output)")),
    UsageCategory.REPLY: (gettext_noop("Reply (input)"), gettext_noop("Reply (output)")),
}
MEMORY_NOTE = "This input includes about {n} tokens of AI memory, already counted in input usage"


def money(value: Any) -> Decimal:
    """A credit amount from str/int/Decimal (floats are refused: they are not money)."""
    if isinstance(value, (float, bool)):
        raise ValueError("credit amounts must not be floats")
    try:
        amount = Decimal(str(value)).quantize(QUANTUM, rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError) as exc:
        raise ValueError(f"not a credit amount: {value!r}") from exc
    if not amount.is_finite() or abs(amount) > MAX_CREDITS:
        raise ValueError("credit amount out of range")
    return amount


# --- prices --------------------------------------------------------------------------------------
def price_for(model_name: str) -> ModelPrice | None:
    return ModelPrice.objects.filter(model_name=model_name).first()


def system_model_price(model_name: str) -> ModelPrice:
    price, _ = ModelPrice.objects.get_or_create(model_name=model_name, defaults={"input_per_1k": DEFAULT_SYSTEM_MODEL_PRICE[0], "output_per_1k": DEFAULT_SYSTEM_MODEL_PRICE[1]})
    return price


def cost_of(price: ModelPrice, input_tokens: int, output_tokens: int) -> tuple[Decimal, Decimal]:
    per_thousand = Decimal(1000)
    input_cost = (Decimal(input_tokens) * price.input_per_1k / per_thousand).quantize(QUANTUM, rounding=ROUND_HALF_UP)
    output_cost = (Decimal(output_tokens) * price.output_per_1k / per_thousand).quantize(QUANTUM, rounding=ROUND_HALF_UP)
    return input_cost, output_cost


# --- quota periods -------------------------------------------------------------------------------
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


def _roll_if_due(quota: MemberQuota | RoleQuota, now: datetime) -> None:
    """Called with the quota row locked."""
    current = period_start(quota.period, now)
    if quota.period_start < current:
        quota.used = ZERO
        quota.period_start = current


# --- balances and grants -------------------------------------------------------------------------
def balance_of(workspace: Workspace) -> Decimal:
    account = CreditAccount.objects.filter(workspace=workspace).first()
    return account.balance if account else ZERO


@dataclass
class Grant:
    entry: LedgerEntry
    balance: Decimal


def grant_credits(workspace: Workspace, amount: Decimal, *, actor: Actor = None, note: str = "") -> Grant:
    """Add credits (a negative amount takes them back, never below zero)."""
    amount = money(amount)
    if amount == ZERO:
        raise ValueError("the amount must not be zero")
    CreditAccount.objects.get_or_create(workspace=workspace)
    with transaction.atomic():
        account = CreditAccount.objects.select_for_update().get(workspace=workspace)
        new_balance = account.balance + amount
        if new_balance < ZERO:
            raise ValueError("a negative grant may not take the balance below zero")
        if new_balance > MAX_CREDITS:
            raise ValueError("the balance would be out of range")
        entry = LedgerEntry.objects.create(workspace=workspace, kind=LedgerKind.GRANT, amount=amount, actor_label=actor_label(actor), note=note[:200])
        CreditAccount.objects.filter(pk=account.pk).update(balance=F("balance") + amount, updated_at=timezone.now())
        audit(
            "credits.granted",
            workspace=workspace,
            actor=actor,
            target=f"workspace #{workspace.pk}",
            changes={"amount": str(amount), "balance": [str(account.balance), str(new_balance)], "ledgerEntryId": entry.pk},
        )
    return Grant(entry=entry, balance=new_balance)


# --- quotas (owner API and admin) ----------------------------------------------------------------
def _set_quota(
    model: type[MemberQuota] | type[RoleQuota], owner: dict[str, Any], *, limit: Decimal, period: str, actor: Actor, workspace: Workspace, action: str, target: str
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
            _roll_if_due(quota, now)
            if quota.period != period:
                quota.period, quota.period_start = period, period_start(period, now)
            quota.limit = limit
            quota.save()
        audit(action, workspace=workspace, actor=actor, target=target, changes={"old": old, "new": {"limit": str(limit), "period": period}})
    return quota


def _delete_quota(model: type[MemberQuota] | type[RoleQuota], owner: dict[str, Any], *, actor: Actor, workspace: Workspace, action: str, target: str) -> bool:
    with transaction.atomic():
        deleted, _ = model.objects.filter(**owner).delete()
        if deleted:
            audit(action, workspace=workspace, actor=actor, target=target)
    return bool(deleted)


def set_member_quota(member: Member, *, limit: Decimal, period: str, actor: Actor) -> MemberQuota:
    return _set_quota(MemberQuota, {"member": member}, limit=limit, period=period, actor=actor, workspace=member.workspace, action="credits.member_quota_set", target=f"member #{member.pk}")


def delete_member_quota(member: Member, *, actor: Actor) -> bool:
    return _delete_quota(MemberQuota, {"member": member}, actor=actor, workspace=member.workspace, action="credits.member_quota_removed", target=f"member #{member.pk}")


def set_role_quota(workspace: Workspace, role: str, *, limit: Decimal, period: str, actor: Actor) -> RoleQuota:
    return _set_quota(RoleQuota, {"workspace": workspace, "role": role}, limit=limit, period=period, actor=actor, workspace=workspace, action="credits.role_quota_set", target=f"role {role}")


def delete_role_quota(workspace: Workspace, role: str, *, actor: Actor) -> bool:
    return _delete_quota(RoleQuota, {"workspace": workspace, "role": role}, actor=actor, workspace=workspace, action="credits.role_quota_removed", target=f"role {role}")


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


# --- charging ------------------------------------------------------------------------------------
class CreditRefused(Exception):
    """The workspace's credits, the member's quota or the role's quota cannot cover a charge."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def precheck(workspace: Workspace, member: Member, now: datetime | None = None) -> str | None:
    """Without locks: is anything already used up? (The charge re-checks under locks.)"""
    now = now or timezone.now()
    account = CreditAccount.objects.filter(workspace=workspace).first()
    if account is None or account.balance <= ZERO:
        return REASON_CREDITS
    quota = MemberQuota.objects.filter(member=member).first()
    if quota is not None and effective_used(quota, now) >= quota.limit:
        return REASON_MEMBER_QUOTA
    role_quota = RoleQuota.objects.filter(workspace=workspace, role=member.role).first()
    if role_quota is not None and effective_used(role_quota, now) >= role_quota.limit:
        return REASON_ROLE_QUOTA
    return None


def charge(
    *,
    workspace: Workspace,
    member: Member,
    category: str,
    model_name: str,
    input_tokens: int,
    output_tokens: int,
    input_cost: Decimal,
    output_cost: Decimal,
    conversation_id: str = "",
    memory_tokens: int = 0,
    enforce: bool = True,
) -> UsageRecord:
    """Write one pending usage record and deduct its cost from the workspace balance, the
    member's quota and the member's role quota, all or nothing.

    enforce=True (consolidations): refuse with `CreditRefused` if any of the three cannot cover
    the cost. enforce=False (reply usage: the reply has already been delivered): always record
    and deduct, even below zero — a negative balance then refuses every consolidation until
    credits are granted.

    Callers that must store other rows with the charge (consolidation's memories) call this
    inside their own transaction.
    """
    total = input_cost + output_cost
    role = member.role
    now = timezone.now()
    CreditAccount.objects.get_or_create(workspace=workspace)
    with transaction.atomic():
        # Lock order: account → member quota → role quota. Never change it.
        account = CreditAccount.objects.select_for_update().get(workspace=workspace)
        quota = MemberQuota.objects.select_for_update().filter(member=member).first()
        role_quota = RoleQuota.objects.select_for_update().filter(workspace=workspace, role=role).first()
        if enforce and (account.balance <= ZERO or account.balance < total):
            raise CreditRefused(REASON_CREDITS)
        for row in (quota, role_quota):
            if row is not None:
                _roll_if_due(row, now)
        if enforce and quota is not None and (quota.used >= quota.limit or quota.used + total > quota.limit):
            raise CreditRefused(REASON_MEMBER_QUOTA)
        if enforce and role_quota is not None and (role_quota.used >= role_quota.limit or role_quota.used + total > role_quota.limit):
            raise CreditRefused(REASON_ROLE_QUOTA)
        record = UsageRecord.objects.create(
            workspace=workspace,
            member=member,
            role=role,
            category=category,
            model_name=model_name,
            conversation_id=conversation_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            memory_tokens=memory_tokens,
            input_cost=input_cost,
            output_cost=output_cost,
            created_at=now,
        )
        CreditAccount.objects.filter(pk=account.pk).update(balance=F("balance") - total, updated_at=now)
        for row in (quota, role_quota):
            if row is not None:
                row.used += total
                row.save(update_fields=["used", "period_start", "updated_at"])
    return record


def record_reply_usage(member: Member, *, conversation_id: str, model_name: str, input_tokens: int, output_tokens: int, memory_tokens: int) -> UsageRecord:
    price = price_for(model_name)
    if price is None:
        raise ApiError(400, "UNKNOWN_MODEL", "This model has no price in the price table; ask a platform admin to add it.", {"model": model_name})
    input_cost, output_cost = cost_of(price, input_tokens, output_tokens)
    return charge(
        workspace=member.workspace,
        member=member,
        category=UsageCategory.REPLY,
        model_name=model_name,
        conversation_id=conversation_id,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        memory_tokens=memory_tokens,
        input_cost=input_cost,
        output_cost=output_cost,
        enforce=False,
    )


# --- reading usage (usage API and page) -----------------------------------------------------------
def visible_usage(member: Member) -> QuerySet[UsageRecord]:
    """The usage records a member may read: the workspace's with `usage:read_all`, else their own."""
    queryset = UsageRecord.objects.filter(workspace_id=member.workspace_id)
    return queryset if member.has_perm("usage:read_all") else queryset.filter(member=member)


def usage_totals(queryset: QuerySet[UsageRecord]) -> dict[str, Any]:
    """Records, tokens and costs of `queryset` (0 when it is empty), `total` = input + output cost."""
    money = DecimalField(max_digits=CREDIT_DIGITS + 4, decimal_places=CREDIT_PLACES)  # a sum may pass one record's digits
    zero = Value(ZERO, output_field=money)
    totals = queryset.order_by().aggregate(
        records=Count("id"),
        inputTokens=Coalesce(Sum("input_tokens"), 0),
        outputTokens=Coalesce(Sum("output_tokens"), 0),
        memoryTokens=Coalesce(Sum("memory_tokens"), 0),
        inputCost=Coalesce(Sum("input_cost", output_field=money), zero),
        outputCost=Coalesce(Sum("output_cost", output_field=money), zero),
    )
    totals["total"] = totals["inputCost"] + totals["outputCost"]
    return totals


# --- presentation (usage API and page) -----------------------------------------------------------
def usage_lines(record: UsageRecord) -> list[dict[str, Any]]:
    input_label, output_label = LINE_LABELS.get(record.category, ("Input", "Output"))
    input_line: dict[str, Any] = {"label": input_label, "kind": "input", "tokens": record.input_tokens, "cost": str(record.input_cost)}
    if record.memory_tokens:
        input_line["memoryTokens"] = record.memory_tokens
        input_line["note"] = memory_note(record)
    return [input_line, {"label": output_label, "kind": "output", "tokens": record.output_tokens, "cost": str(record.output_cost)}]


def memory_note(record: UsageRecord) -> str:
    return MEMORY_NOTE.format(n=record.memory_tokens) if record.memory_tokens else ""


def usage_json(record: UsageRecord, *, own: bool = True) -> dict[str, Any]:
    """`own=False` (an owner reading another member's record): the conversation id, which the
    member's agent wrote, is left out; the figures stay."""
    return {
        "id": str(record.pk),
        "createdAt": iso(record.created_at),
        "category": record.category,
        "categoryLabel": UsageCategory(record.category).label,
        "memberId": str(record.member_id) if record.member_id else None,
        "role": record.role,
        "model": record.model_name,
        "conversationId": (record.conversation_id or None) if own else None,
        "lines": usage_lines(record),
        "total": str(record.total_cost),
        "status": record.status,
    }


# --- beat jobs (all idempotent; safe to run twice or concurrently) -------------------------------
SETTLE_CHUNK = 500


def settle_usage() -> dict[str, int]:
    """Pending usage → one ledger entry each. The unique usage_record on the ledger makes a
    replayed chunk (a crash between insert and status update, or a second runner) a no-op."""

    def step() -> tuple[int, int]:
        chunk = list(
            UsageRecord.objects.select_for_update(skip_locked=True)
            .filter(status=UsageStatus.PENDING)
            .order_by("id")
            .only("id", "workspace_id", "member_id", "input_cost", "output_cost", "created_at")[:SETTLE_CHUNK]
        )
        if not chunk:
            return 0, 0
        now = timezone.now()
        LedgerEntry.objects.bulk_create(
            [
                LedgerEntry(
                    workspace_id=r.workspace_id, kind=LedgerKind.USAGE, amount=-(r.input_cost + r.output_cost), usage_record_id=r.pk, member_ref=r.member_id, actor_label="system", created_at=now
                )
                for r in chunk
            ],
            ignore_conflicts=True,
        )
        return len(chunk), UsageRecord.objects.filter(pk__in=[r.pk for r in chunk], status=UsageStatus.PENDING).update(status=UsageStatus.SETTLED, settled_at=now)

    return {"settled": run_in_chunks(step, chunk=SETTLE_CHUNK)}


def daily_rollup(now: datetime | None = None) -> dict[str, int]:
    """Recompute, whole, the roll-ups of yesterday and today, and of any day that has usage
    but no roll-up yet (a stopped beat catches up)."""
    now = now or timezone.now()
    today = now.astimezone(UTC).date()
    recent_start = datetime(today.year, today.month, today.day, tzinfo=UTC) - timedelta(days=1)
    by_day = UsageRecord.objects.annotate(day=TruncDate("created_at", tzinfo=UTC))
    wanted = set(by_day.filter(created_at__gte=recent_start).values_list("workspace_id", "day").distinct())
    known = set(UsageRollup.objects.values_list("workspace_id", "day").distinct())
    wanted |= set(by_day.values_list("workspace_id", "day").distinct()) - known
    rows = 0
    for workspace_id, day in sorted(wanted):
        rows += _rollup_day(workspace_id, day)
    return {"days": len(wanted), "rows": rows}


def _rollup_day(workspace_id: int, day: date) -> int:
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    groups = (
        UsageRecord.objects.filter(workspace_id=workspace_id, created_at__gte=start, created_at__lt=start + timedelta(days=1))
        .values("member_id", "role", "category")
        .annotate(
            n=Count("id"),
            input_tokens_sum=Coalesce(Sum("input_tokens"), 0),
            output_tokens_sum=Coalesce(Sum("output_tokens"), 0),
            memory_tokens_sum=Coalesce(Sum("memory_tokens"), 0),
            input_cost_sum=Coalesce(Sum("input_cost"), Value(ZERO), output_field=_decimal()),
            output_cost_sum=Coalesce(Sum("output_cost"), Value(ZERO), output_field=_decimal()),
        )
        .order_by()
    )
    now = timezone.now()
    merged: dict[tuple[int, str, str], UsageRollup] = {}
    for g in groups:
        key = (g["member_id"] or 0, g["role"], g["category"])
        row = merged.get(key)
        if row is None:
            merged[key] = UsageRollup(
                workspace_id=workspace_id,
                day=day,
                member_ref=key[0],
                role=key[1],
                category=key[2],
                records=g["n"],
                input_tokens=g["input_tokens_sum"],
                output_tokens=g["output_tokens_sum"],
                memory_tokens=g["memory_tokens_sum"],
                input_cost=g["input_cost_sum"],
                output_cost=g["output_cost_sum"],
                computed_at=now,
            )
        else:  # several removed members (member_id NULL) fold into member_ref 0
            row.records += g["n"]
            row.input_tokens += g["input_tokens_sum"]
            row.output_tokens += g["output_tokens_sum"]
            row.memory_tokens += g["memory_tokens_sum"]
            row.input_cost += g["input_cost_sum"]
            row.output_cost += g["output_cost_sum"]
    with transaction.atomic():
        UsageRollup.objects.filter(workspace_id=workspace_id, day=day).delete()
        UsageRollup.objects.bulk_create(merged.values())
    return len(merged)


def _decimal() -> DecimalField:
    return DecimalField(max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES)


def quota_reset(now: datetime | None = None) -> dict[str, int]:
    """Start a new period for every quota whose period has ended; claimed by a conditional
    UPDATE on the old period start, so two runners reset each quota once."""
    now = now or timezone.now()
    reset = 0
    for model in (MemberQuota, RoleQuota):
        for period in QuotaPeriod.values:
            current = period_start(period, now)
            reset += model.objects.filter(period=period, period_start__lt=current).update(used=ZERO, period_start=current, updated_at=now)
    return {"reset": reset}


def reconcile_credits(now: datetime | None = None) -> dict[str, int]:
    """Check every balance against the ledger. The balance and both sums are read in one SQL
    statement (one snapshot), so concurrent charges and settlement cannot fake a difference.
    A difference is recorded as an audit event once (again only if it changes), never
    "fixed" silently: a platform admin decides."""
    now = now or timezone.now()
    ledger = LedgerEntry.objects.filter(workspace_id=OuterRef("workspace_id")).order_by().values("workspace_id").annotate(s=Sum("amount")).values("s")
    pending = (
        UsageRecord.objects.filter(workspace_id=OuterRef("workspace_id"), status=UsageStatus.PENDING)
        .order_by()
        .values("workspace_id")
        .annotate(s=Sum(F("input_cost") + F("output_cost"), output_field=_decimal()))
        .values("s")
    )
    accounts = CreditAccount.objects.select_related("workspace").annotate(
        ledger_sum=Coalesce(Subquery(ledger, output_field=_decimal()), Value(ZERO), output_field=_decimal()),
        pending_sum=Coalesce(Subquery(pending, output_field=_decimal()), Value(ZERO), output_field=_decimal()),
    )
    checked = discrepancies = recorded = 0
    for account in accounts.iterator(chunk_size=500):
        checked += 1
        expected = money(account.ledger_sum - account.pending_sum)
        difference = money(account.balance - expected)
        if difference != ZERO:
            discrepancies += 1
        previous = account.discrepancy
        new_value = difference if difference != ZERO else None
        with transaction.atomic():
            claimed = CreditAccount.objects.filter(pk=account.pk, discrepancy=previous) if previous is not None else CreditAccount.objects.filter(pk=account.pk, discrepancy__isnull=True)
            changed = new_value != previous
            updated = claimed.update(discrepancy=new_value, reconciled_at=now)
            if updated and changed:
                recorded += 1
                if new_value is not None:
                    audit(
                        "credits.discrepancy",
                        workspace=account.workspace,
                        target=f"workspace #{account.workspace_id}",
                        changes={"balance": str(account.balance), "ledgerExpected": str(expected), "difference": str(difference)},
                        reason="Balance does not equal the ledger minus pending usage.",
                    )
                else:
                    audit(
                        "credits.reconciled", workspace=account.workspace, target=f"workspace #{account.workspace_id}", changes={"balance": str(account.balance), "previousDifference": str(previous)}
                    )
    return {"checked": checked, "discrepancies": discrepancies, "recorded": recorded}
