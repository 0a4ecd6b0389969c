"""The usage history and the credits summary as the API and the pages read them (SPEC §9): who
sees which records, the credits per day (the API's days are UTC days, the pages' the viewer's
local days), the lines and their AI-memory note, the owner's credits summary."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.utils import translation

from credits import charging, jobs, pricing, quotas, usage
from credits.models import CREDIT_DIGITS, CREDIT_PLACES, MemberQuota, ModelPrice, RoleQuota, UsageRecord
from tests.support import client_for

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
LATE = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)  # 2 March 08:30 in Tokyo


def record(
    world, member, at: datetime, *, category: str = "ai_memory", cost: str = "1", memory_tokens: int = 0, workspace=None
) -> UsageRecord:
    return UsageRecord.objects.create(
        workspace=workspace or world.workspace,
        member=member,
        role=member.role,
        category=category,
        model_name="m",
        input_tokens=1000,
        output_tokens=100,
        memory_tokens=memory_tokens,
        input_cost=Decimal(cost),
        output_cost=Decimal("0.25"),
        created_at=at,
    )


def as_decimals(rows: list[dict]) -> list[dict]:
    """Amounts are strings of decimals; their digits after the point differ by backend (an
    aggregate on SQLite has no scale, PostgreSQL's numeric keeps six)."""
    assert all(
        isinstance(v, str) for row in rows for k, v in row.items() if k.endswith(("cost", "Cost")) or k == "total"
    )
    return [
        {k: Decimal(v) if k.endswith(("cost", "Cost")) or k == "total" else v for k, v in row.items()} for row in rows
    ]


# --- the usage API: the credits per UTC day ---------------------------------------------------------
@time_machine.travel(NOW, tick=False)
def test_the_usage_series_is_per_utc_day_and_category_whatever_the_site_time_zone(world, settings):
    settings.TIME_ZONE = "Asia/Tokyo"
    record(world, world.editor, LATE)
    record(world, world.editor, LATE, category="reply", cost="2")
    record(world, world.owner, datetime(2026, 3, 2, 0, 30, tzinfo=UTC), cost="0.5")
    record(world, world.outsider, LATE, workspace=world.other_workspace)
    body = client_for(world.owner).get(f"/api/w/{world.workspace.pk}/usage").json()
    assert as_decimals(body["series"]) == [
        {"day": "2026-03-01", "category": "ai_memory", "cost": Decimal("1.25")},
        {"day": "2026-03-01", "category": "reply", "cost": Decimal("2.25")},
        {"day": "2026-03-02", "category": "ai_memory", "cost": Decimal("0.75")},
    ]
    totals = {
        "records": 3,
        "inputTokens": 3000,
        "outputTokens": 300,
        "memoryTokens": 0,
        "inputCost": Decimal("3.5"),
        "outputCost": Decimal("0.75"),
        "total": Decimal("4.25"),
    }
    assert as_decimals([body["totals"]]) == [totals]
    own = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/usage", {"period": "2026-03-01"}).json()
    assert [s["day"] for s in own["series"]] == ["2026-03-01", "2026-03-01"] and own["totals"]["records"] == 2


# --- the credits summary ------------------------------------------------------------------------------
@time_machine.travel(NOW, tick=False)
def test_the_credits_endpoint_answers_balance_prices_quotas_and_the_newest_20_ledger_entries(world):
    ModelPrice.objects.create(model_name="b-model", input_per_1k="1", output_per_1k="2.5")
    ModelPrice.objects.create(model_name="a-model", input_per_1k="0.5", output_per_1k="0")
    for _ in range(20):
        charging.grant_credits(world.workspace, Decimal("1"))
    charging.grant_credits(world.other_workspace, Decimal("7"))
    reply = charging.record_reply_usage(
        world.editor, conversation_id="c", model_name="b-model", input_tokens=1000, output_tokens=0, memory_tokens=0
    )
    jobs.settle_usage()
    charging.grant_credits(world.workspace, Decimal("2"), note="top-up")
    member_quota = quotas.set_member_quota(world.editor, limit=Decimal("10"), period="week", actor=None)
    role_quota = quotas.set_role_quota(world.workspace, "viewer", limit=Decimal("3"), period="month", actor=None)
    quotas.set_role_quota(world.workspace, "editor", limit=Decimal("4"), period="day", actor=None)
    quotas.set_member_quota(world.outsider, limit=Decimal("1"), period="day", actor=None)

    body = client_for(world.owner).get(f"/api/w/{world.workspace.pk}/credits").json()
    assert list(body) == ["balance", "prices", "memberQuotas", "roleQuotas", "ledger"]
    assert body["balance"] == "21.000000"
    assert body["prices"] == [
        {"model": "a-model", "inputPer1k": "0.500000", "outputPer1k": "0.000000"},
        {"model": "b-model", "inputPer1k": "1.000000", "outputPer1k": "2.500000"},
    ]
    assert body["memberQuotas"] == [
        {"memberId": str(world.editor.pk), **quotas.quota_json(MemberQuota.objects.get(pk=member_quota.pk))}
    ]
    assert [q["role"] for q in body["roleQuotas"]] == ["editor", "viewer"]
    assert body["roleQuotas"][1] == {"role": "viewer", **quotas.quota_json(RoleQuota.objects.get(pk=role_quota.pk))}
    assert (
        body["memberQuotas"][0]["periodStart"] == "2026-03-02T00:00:00Z"
        and body["memberQuotas"][0]["used"] == "0.000000"
    )
    ledger = body["ledger"]
    assert len(ledger) == 20
    top_up, settled, grant = ledger[0], ledger[1], ledger[2]
    assert top_up == {
        "id": top_up["id"],
        "kind": "grant",
        "amount": "2.000000",
        "usageRecordId": None,
        "createdAt": "2026-03-02T12:00:00Z",
        "note": "top-up",
    }
    assert settled == {
        "id": settled["id"],
        "kind": "usage",
        "amount": "-1.000000",
        "usageRecordId": str(reply.pk),
        "createdAt": "2026-03-02T12:00:00Z",
        "note": "",
    }
    assert grant["kind"] == "grant" and grant["amount"] == "1.000000"
    assert [int(e["id"]) for e in ledger] == sorted((int(e["id"]) for e in ledger), reverse=True)


def test_a_workspace_never_granted_has_a_zero_balance_and_empty_lists(world):
    body = client_for(world.owner).get(f"/api/w/{world.workspace.pk}/credits").json()
    assert body == {"balance": "0", "prices": [], "memberQuotas": [], "roleQuotas": [], "ledger": []}


# --- credits.usage.daily_costs: the one sum per day -----------------------------------------------------
TOKYO = ZoneInfo("Asia/Tokyo")


@pytest.mark.parametrize(("tz", "day"), [(UTC, date(2026, 3, 1)), (TOKYO, date(2026, 3, 2))])
def test_daily_costs_counts_a_record_at_2330_utc_on_its_day_in_the_zone_given(world, tz, day):
    record(world, world.editor, LATE)
    (row,) = usage.daily_costs(UsageRecord.objects.all(), tz)
    assert row == {"day": day, "cost": Decimal("1.25")}


def test_daily_costs_sums_input_and_output_per_day_oldest_first_or_per_day_and_category(world):
    record(world, world.editor, datetime(2026, 3, 2, 0, 30, tzinfo=UTC), category="reply", cost="2")
    record(world, world.editor, LATE)
    record(world, world.owner, datetime(2026, 3, 1, 1, 0, tzinfo=UTC), cost="0.5")
    assert usage.daily_costs(UsageRecord.objects.all(), UTC) == [
        {"day": date(2026, 3, 1), "cost": Decimal("2.00")},
        {"day": date(2026, 3, 2), "cost": Decimal("2.25")},
    ]
    assert usage.daily_costs(UsageRecord.objects.all(), TOKYO, by_category=True) == [
        {"day": date(2026, 3, 1), "category": "ai_memory", "cost": Decimal("0.75")},
        {"day": date(2026, 3, 2), "category": "ai_memory", "cost": Decimal("1.25")},
        {"day": date(2026, 3, 2), "category": "reply", "cost": Decimal("2.25")},
    ]
    assert usage.daily_costs(UsageRecord.objects.filter(member=world.owner), UTC) == [
        {"day": date(2026, 3, 1), "cost": Decimal("0.75")}
    ]
    assert usage.daily_costs(UsageRecord.objects.none(), UTC) == []


def test_daily_costs_since_starts_at_that_days_midnight_in_the_zone(world):
    record(world, world.editor, datetime(2026, 3, 1, 14, 59, tzinfo=UTC))  # 23:59 on 1 March in Tokyo
    record(world, world.editor, datetime(2026, 3, 1, 15, 0, tzinfo=UTC), cost="2")  # midnight, 2 March in Tokyo
    assert usage.daily_costs(UsageRecord.objects.all(), TOKYO, since=date(2026, 3, 2)) == [
        {"day": date(2026, 3, 2), "cost": Decimal("2.25")}
    ]
    assert [row["day"] for row in usage.daily_costs(UsageRecord.objects.all(), UTC, since=date(2026, 3, 1))] == [
        date(2026, 3, 1)
    ]
    assert usage.daily_costs(UsageRecord.objects.all(), UTC, since=date(2026, 3, 2)) == []


def test_every_sum_of_credits_has_the_one_money_field():
    assert (pricing.MONEY_SUM.max_digits, pricing.MONEY_SUM.decimal_places) == (CREDIT_DIGITS + 4, CREDIT_PLACES)


# --- credits.charging.credits_summary ---------------------------------------------------------------
@time_machine.travel(NOW, tick=False)
def test_credits_summary_is_the_workspaces_own_balance_quotas_and_ledger_and_every_price(world):
    ModelPrice.objects.create(model_name="b-model", input_per_1k="1", output_per_1k="2.5")
    grant = charging.grant_credits(world.workspace, Decimal("3"), note="start")
    charging.grant_credits(world.other_workspace, Decimal("9"))
    quotas.set_member_quota(world.outsider, limit=Decimal("1"), period="day", actor=None)
    quotas.set_role_quota(world.other_workspace, "editor", limit=Decimal("1"), period="day", actor=None)
    quota = quotas.set_role_quota(world.workspace, "editor", limit=Decimal("4"), period="day", actor=None)
    summary = charging.credits_summary(world.workspace)
    assert summary == {
        "balance": "3.000000",
        "prices": [{"model": "b-model", "inputPer1k": "1.000000", "outputPer1k": "2.500000"}],
        "memberQuotas": [],
        "roleQuotas": [
            {
                "role": "editor",
                "limit": "4.000000",
                "used": "0.000000",
                "remaining": "4.000000",
                "period": "day",
                "periodStart": "2026-03-02T00:00:00Z",
                "periodEnd": "2026-03-03T00:00:00Z",
            }
        ],
        "ledger": [
            {
                "id": str(grant.entry.pk),
                "kind": "grant",
                "amount": "3.000000",
                "usageRecordId": None,
                "createdAt": "2026-03-02T12:00:00Z",
                "note": "start",
            }
        ],
    }
    assert summary["roleQuotas"][0] == {"role": "editor", **quotas.quota_json(RoleQuota.objects.get(pk=quota.pk))}
    assert charging.SUMMARY_LEDGER == 20


# --- who sees all; a record's lines -------------------------------------------------------------------
def test_sees_all_usage_is_the_read_all_permission_and_decides_the_visible_records(world):
    mine, theirs = record(world, world.editor, LATE), record(world, world.owner, LATE)
    record(world, world.outsider, LATE, workspace=world.other_workspace)
    assert [usage.sees_all_usage(m) for m in (world.owner, world.editor, world.viewer)] == [True, False, False]
    assert set(UsageRecord.objects.restrict(world.owner, "view")) == {mine, theirs}
    assert (
        list(UsageRecord.objects.restrict(world.editor, "view")) == [mine]
        and list(UsageRecord.objects.restrict(world.viewer, "view")) == []
    )


def test_lines_of_labels_by_category_and_puts_the_memory_tokens_on_the_input_line(world):
    reply = record(world, world.editor, LATE, category="reply", cost="0.5", memory_tokens=40)
    assert usage.lines_of(reply) == [
        usage.UsageLine("Reply (input)", "input", 1000, Decimal("0.5"), 40),
        usage.UsageLine("Reply (output)", "output", 100, Decimal("0.25"), 0),
    ]
    consolidation = UsageRecord.objects.get(pk=record(world, world.editor, LATE).pk)
    assert [(line.label, line.cost) for line in usage.lines_of(consolidation)] == [
        ("AI memory (input)", Decimal("1.000000")),
        ("AI memory (output)", Decimal("0.250000")),
    ]
    assert usage.usage_lines(consolidation) == [
        {"label": "AI memory (input)", "kind": "input", "tokens": 1000, "cost": "1.000000"},
        {"label": "AI memory (output)", "kind": "output", "tokens": 100, "cost": "0.250000"},
    ]
    assert list(usage.usage_lines(reply)[0]) == ["label", "kind", "tokens", "cost", "memoryTokens", "note"]


# --- the AI-memory note: one text --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tokens", "note"),
    [
        (0, ""),
        (1, "This input includes about 1 token of AI memory, already counted in input usage"),
        (150, "This input includes about 150 tokens of AI memory, already counted in input usage"),
    ],
)
def test_memory_note_is_english_for_the_api_and_translated_for_pages(world, tokens, note):
    reply = record(world, world.editor, LATE, category="reply", memory_tokens=tokens)
    with translation.override("ja"):
        assert usage.memory_note(reply) == note
        assert usage.memory_note(reply, translated=True) == (
            f"この入力には AI メモリ約 {tokens} tokens が含まれており、入力使用量に計上済みです" if tokens else ""
        )
    with translation.override("en"):
        assert usage.memory_note(reply, translated=True) == note


def test_the_api_note_says_one_token_like_the_page_whatever_the_request_language(world):
    """The API wrote "about 1 tokens" where the page said "about 1 token": one text now, the API's in English."""
    record(world, world.editor, LATE, category="reply", memory_tokens=1)
    response = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/usage", HTTP_ACCEPT_LANGUAGE="ja")
    (line, _) = response.json()["records"][0]["lines"]
    assert (line["memoryTokens"], line["note"]) == (
        1,
        "This input includes about 1 token of AI memory, already counted in input usage",
    )


def test_the_daily_rollup_sums_each_utc_day_per_member_role_and_category_and_catches_up(world):
    """`jobs.daily_rollup`: yesterday and today recomputed whole, and any older day that has usage
    but no roll-up; one row per (member, role, category) of a UTC day with its records, tokens and
    costs; a removed member's records (member NULL) roll up under member_ref 0; a rerun changes nothing."""
    from datetime import timedelta

    from credits.models import UsageRollup

    day1_end = datetime(2026, 3, 1, 23, 59, 59, 999999, tzinfo=UTC)
    record(world, world.editor, day1_end, cost="1")
    record(world, world.editor, NOW.replace(hour=0), cost="2", memory_tokens=7)
    record(world, world.editor, NOW, category="reply", cost="3")
    record(world, world.owner, NOW, cost="4")
    UsageRecord.objects.create(
        workspace=world.workspace,
        member=None,
        role="viewer",
        category="reply",
        model_name="m",
        input_tokens=5,
        output_tokens=6,
        memory_tokens=0,
        input_cost=Decimal("0.5"),
        output_cost=Decimal("0.5"),
        created_at=NOW,
    )
    record(world, world.editor, NOW - timedelta(days=10), cost="5")  # an old day with no roll-up yet
    assert jobs.daily_rollup(now=NOW) == {"days": 3, "rows": 6}
    rows = sorted(
        (
            r.day,
            r.member_ref,
            r.role,
            r.category,
            r.records,
            r.input_tokens,
            r.output_tokens,
            r.memory_tokens,
            Decimal(r.input_cost),
            Decimal(r.output_cost),
        )
        for r in UsageRollup.objects.filter(workspace=world.workspace)
    )
    editor, owner = world.editor.pk, world.owner.pk
    assert rows == sorted(
        [
            (date(2026, 2, 20), editor, "editor", "ai_memory", 1, 1000, 100, 0, Decimal("5"), Decimal("0.25")),
            (date(2026, 3, 1), editor, "editor", "ai_memory", 1, 1000, 100, 0, Decimal("1"), Decimal("0.25")),
            (date(2026, 3, 2), 0, "viewer", "reply", 1, 5, 6, 0, Decimal("0.5"), Decimal("0.5")),
            (date(2026, 3, 2), editor, "editor", "ai_memory", 1, 1000, 100, 7, Decimal("2"), Decimal("0.25")),
            (date(2026, 3, 2), editor, "editor", "reply", 1, 1000, 100, 0, Decimal("3"), Decimal("0.25")),
            (date(2026, 3, 2), owner, "owner", "ai_memory", 1, 1000, 100, 0, Decimal("4"), Decimal("0.25")),
        ]
    )
    record(world, world.editor, NOW, cost="1")  # a second record the same day: the day is recomputed whole
    assert jobs.daily_rollup(now=NOW) == {"days": 2, "rows": 5}
    today = UsageRollup.objects.get(
        workspace=world.workspace, day=date(2026, 3, 2), member_ref=editor, category="ai_memory"
    )
    assert (
        today.records,
        today.input_tokens,
        today.memory_tokens,
        Decimal(today.input_cost),
        Decimal(today.output_cost),
    ) == (2, 2000, 7, Decimal("3"), Decimal("0.5"))
    assert UsageRollup.objects.filter(workspace=world.workspace).count() == 6


def test_reconciliation_checks_each_workspace_against_its_own_ledger_and_pending_usage(world):
    """`jobs.reconcile_credits`: per account, balance = Σ its own ledger − its own pending usage;
    a difference is stored on the account with the time, audited with the figures, recorded again
    only when it changes; a matching balance clears it (audited once)."""
    from credits.models import CreditAccount
    from governance.models import AuditEvent

    charging.grant_credits(world.workspace, Decimal("100"))
    charging.grant_credits(world.other_workspace, Decimal("7"))
    record(world, world.editor, NOW, cost="2")  # pending: 2 + 0.25 held back from the balance
    CreditAccount.objects.filter(workspace=world.workspace).update(balance=Decimal("97.75"))
    assert jobs.reconcile_credits(now=NOW) == {"checked": 2, "discrepancies": 0, "recorded": 0}
    CreditAccount.objects.filter(workspace=world.workspace).update(balance=Decimal("98"))
    assert jobs.reconcile_credits(now=NOW) == {"checked": 2, "discrepancies": 1, "recorded": 1}
    account = CreditAccount.objects.get(workspace=world.workspace)
    assert Decimal(account.discrepancy) == Decimal("0.25") and account.reconciled_at == NOW
    assert CreditAccount.objects.get(workspace=world.other_workspace).discrepancy is None
    event = AuditEvent.objects.get(action="credits.discrepancy")
    assert event.workspace == world.workspace and event.target == f"workspace #{world.workspace.pk}"
    assert {k: Decimal(v) for k, v in event.changes.items()} == {
        "balance": Decimal("98"),
        "ledgerExpected": Decimal("97.75"),
        "difference": Decimal("0.25"),
    }
    CreditAccount.objects.filter(workspace=world.workspace).update(
        balance=Decimal("99")
    )  # a different difference: recorded again
    assert (
        jobs.reconcile_credits(now=NOW)["recorded"] == 1
        and AuditEvent.objects.filter(action="credits.discrepancy").count() == 2
    )
    CreditAccount.objects.filter(workspace=world.workspace).update(balance=Decimal("97.75"))
    assert jobs.reconcile_credits(now=NOW) == {"checked": 2, "discrepancies": 0, "recorded": 1}
    cleared = AuditEvent.objects.get(action="credits.reconciled")
    assert (
        Decimal(cleared.changes["previousDifference"]) == Decimal("1.25")
        and CreditAccount.objects.get(workspace=world.workspace).discrepancy is None
    )
