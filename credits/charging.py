"""Charging (SPEC §9): balances (and the owner's credits summary), grants and the charge itself.

Every charge locks rows in one fixed order — the workspace's credit account, then the member's
quota, then the role's quota — inside the transaction that writes the usage record, so parallel
charges serialise on the account row and can never overdraw.

Invariant (checked by `credits.jobs.reconcile_credits`):
    balance == Σ ledger amounts − Σ cost of pending usage records
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import ApiError
from core.timestamps import iso
from credits.models import (
    CreditAccount,
    LedgerEntry,
    LedgerKind,
    MemberQuota,
    ModelPrice,
    RoleQuota,
    UsageCategory,
    UsageRecord,
)
from credits.pricing import MAX_CREDITS, ZERO, cost_of, money, price_for, price_json
from credits.quotas import effective_used, quota_json, roll_if_due
from governance.audit import Actor, actor_label, audit
from governance.models import Member, Workspace

#: Skip/refusal reasons shared by the consolidation answer, the Consolidation row and the API.
REASON_CREDITS = "credits"
REASON_MEMBER_QUOTA = "member_quota"
REASON_ROLE_QUOTA = "role_quota"


def balance_of(workspace: Workspace) -> Decimal:
    account = CreditAccount.objects.filter(workspace=workspace).first()
    return account.balance if account else ZERO


# --- the owner's summary (`GET /api/w/:wsId/credits`) -----------------------------------------------
SUMMARY_LEDGER = 20  # the newest ledger entries the summary lists


def ledger_json(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "id": str(entry.pk),
        "kind": entry.kind,
        "amount": str(entry.amount),
        "usageRecordId": str(entry.usage_record_id) if entry.usage_record_id else None,
        "createdAt": iso(entry.created_at),
        "note": entry.note,
    }


def credits_summary(workspace: Workspace) -> dict[str, Any]:
    """The workspace's balance, every model's price, its member and role quotas (with what each
    has used this period) and its newest ledger entries: what the owner reads."""
    member_quotas = MemberQuota.objects.filter(member__workspace=workspace).order_by("member_id")
    role_quotas = RoleQuota.objects.filter(workspace=workspace).order_by("role")
    ledger = LedgerEntry.objects.filter(workspace=workspace).order_by("-created_at", "-id")[:SUMMARY_LEDGER]
    return {
        "balance": str(balance_of(workspace)),
        "prices": [price_json(price) for price in ModelPrice.objects.all()],
        "memberQuotas": [{"memberId": str(q.member_id), **quota_json(q)} for q in member_quotas],
        "roleQuotas": [{"role": q.role, **quota_json(q)} for q in role_quotas],
        "ledger": [ledger_json(entry) for entry in ledger],
    }


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
        entry = LedgerEntry.objects.create(
            workspace=workspace, kind=LedgerKind.GRANT, amount=amount, actor_label=actor_label(actor), note=note[:200]
        )
        CreditAccount.objects.filter(pk=account.pk).update(balance=F("balance") + amount, updated_at=timezone.now())
        audit(
            "credits.granted",
            workspace=workspace,
            actor=actor,
            target=f"workspace #{workspace.pk}",
            changes={
                "amount": str(amount),
                "balance": [str(account.balance), str(new_balance)],
                "ledgerEntryId": entry.pk,
            },
        )
    return Grant(entry=entry, balance=new_balance)


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
                roll_if_due(row, now)
        if enforce and quota is not None and (quota.used >= quota.limit or quota.used + total > quota.limit):
            raise CreditRefused(REASON_MEMBER_QUOTA)
        if (
            enforce
            and role_quota is not None
            and (role_quota.used >= role_quota.limit or role_quota.used + total > role_quota.limit)
        ):
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


def record_reply_usage(
    member: Member, *, conversation_id: str, model_name: str, input_tokens: int, output_tokens: int, memory_tokens: int
) -> UsageRecord:
    price = price_for(model_name)
    if price is None:
        raise ApiError(
            400,
            "UNKNOWN_MODEL",
            "This model has no price in the price table; ask a platform admin to add it.",
            {"model": model_name},
        )
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
