"""The credit accounting's beat jobs (SPEC §9), all idempotent and safe to run twice or
concurrently: settlement into the ledger, the daily roll-ups, the quota reset, the
reconciliation of every balance against the ledger. Registered by name in `retention.jobs`."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from django.db import transaction
from django.db.models import Count, F, OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from core.chunks import run_in_chunks
from credits.models import (
    CreditAccount,
    LedgerEntry,
    LedgerKind,
    MemberQuota,
    QuotaPeriod,
    RoleQuota,
    UsageRecord,
    UsageRollup,
    UsageStatus,
)
from credits.pricing import MONEY_SUM, ZERO, money
from credits.quotas import period_start
from governance.audit import audit

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
                    workspace_id=r.workspace_id,
                    kind=LedgerKind.USAGE,
                    amount=-(r.input_cost + r.output_cost),
                    usage_record_id=r.pk,
                    member_ref=r.member_id,
                    actor_label="system",
                    created_at=now,
                )
                for r in chunk
            ],
            ignore_conflicts=True,
        )
        return len(chunk), UsageRecord.objects.filter(pk__in=[r.pk for r in chunk], status=UsageStatus.PENDING).update(
            status=UsageStatus.SETTLED, settled_at=now
        )

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
        UsageRecord.objects.filter(
            workspace_id=workspace_id, created_at__gte=start, created_at__lt=start + timedelta(days=1)
        )
        .values("member_id", "role", "category")
        .annotate(
            n=Count("id"),
            input_tokens_sum=Coalesce(Sum("input_tokens"), 0),
            output_tokens_sum=Coalesce(Sum("output_tokens"), 0),
            memory_tokens_sum=Coalesce(Sum("memory_tokens"), 0),
            input_cost_sum=Coalesce(Sum("input_cost"), Value(ZERO), output_field=MONEY_SUM),
            output_cost_sum=Coalesce(Sum("output_cost"), Value(ZERO), output_field=MONEY_SUM),
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


def quota_reset(now: datetime | None = None) -> dict[str, int]:
    """Start a new period for every quota whose period has ended; claimed by a conditional
    UPDATE on the old period start, so two runners reset each quota once."""
    now = now or timezone.now()
    reset = 0
    for model in (MemberQuota, RoleQuota):
        for period in QuotaPeriod.values:
            current = period_start(period, now)
            reset += model.objects.filter(period=period, period_start__lt=current).update(
                used=ZERO, period_start=current, updated_at=now
            )
    return {"reset": reset}


def reconcile_credits(now: datetime | None = None) -> dict[str, int]:
    """Check every balance against the ledger. The balance and both sums are read in one SQL
    statement (one snapshot), so concurrent charges and settlement cannot fake a difference.
    A difference is recorded as an audit event once (again only if it changes), never
    "fixed" silently: a platform admin decides."""
    now = now or timezone.now()
    ledger = (
        LedgerEntry.objects.filter(workspace_id=OuterRef("workspace_id"))
        .order_by()
        .values("workspace_id")
        .annotate(s=Sum("amount"))
        .values("s")
    )
    pending = (
        UsageRecord.objects.filter(workspace_id=OuterRef("workspace_id"), status=UsageStatus.PENDING)
        .order_by()
        .values("workspace_id")
        .annotate(s=Sum(F("input_cost") + F("output_cost"), output_field=MONEY_SUM))
        .values("s")
    )
    accounts = CreditAccount.objects.select_related("workspace").annotate(
        ledger_sum=Coalesce(Subquery(ledger, output_field=MONEY_SUM), Value(ZERO), output_field=MONEY_SUM),
        pending_sum=Coalesce(Subquery(pending, output_field=MONEY_SUM), Value(ZERO), output_field=MONEY_SUM),
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
            claimed = (
                CreditAccount.objects.filter(pk=account.pk, discrepancy=previous)
                if previous is not None
                else CreditAccount.objects.filter(pk=account.pk, discrepancy__isnull=True)
            )
            changed = new_value != previous
            updated = claimed.update(discrepancy=new_value, reconciled_at=now)
            if updated and changed:
                recorded += 1
                if new_value is not None:
                    audit(
                        "credits.discrepancy",
                        workspace=account.workspace,
                        target=f"workspace #{account.workspace_id}",
                        changes={
                            "balance": str(account.balance),
                            "ledgerExpected": str(expected),
                            "difference": str(difference),
                        },
                        reason="Balance does not equal the ledger minus pending usage.",
                    )
                else:
                    audit(
                        "credits.reconciled",
                        workspace=account.workspace,
                        target=f"workspace #{account.workspace_id}",
                        changes={"balance": str(account.balance), "previousDifference": str(previous)},
                    )
    return {"checked": checked, "discrepancies": discrepancies, "recorded": recorded}
