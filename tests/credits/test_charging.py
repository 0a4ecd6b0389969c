"""Credits: grants, quotas, charging, reply usage, the usage API and the beat jobs (SPEC §9)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection

from credits import charging, jobs, pricing, quotas
from credits.models import (
    Consolidation,
    ConsolidationStatus,
    CreditAccount,
    LedgerEntry,
    MemberQuota,
    ModelPrice,
    RoleQuota,
    UsageRecord,
    UsageRollup,
)
from governance import actions
from governance.models import AuditEvent
from memoryapp.consolidation import run_consolidation, submit_turn
from tests.credits.support import STUB_COST, StubModel, ai_agent, balance, grant, price_stub_model, use_stub, user_says
from tests.support import client_for, error_code, make_agent, on_postgres


@pytest.fixture
def stub(monkeypatch):
    return use_stub(monkeypatch, StubModel())


@pytest.fixture
def agent(world):
    return ai_agent(world)


def consolidate(world, agent, member=None, model=None) -> dict:
    """Submit a turn for `member` (default: the editor) and run it now."""
    member = member or world.editor
    submitted = submit_turn(
        workspace=world.workspace,
        member=member,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hello"),
    )
    if submitted.consolidation.status != ConsolidationStatus.QUEUED:
        return {"status": submitted.consolidation.status, "reason": submitted.consolidation.reason}
    return run_consolidation(submitted.consolidation.pk, model=model)


# --- grants and the credits API -----------------------------------------------------------------
def test_grant_credits_command_prints_json_and_writes_the_ledger(world):
    out = StringIO()
    call_command("grant_credits", str(world.workspace.pk), "12.5", "--json", stdout=out)
    result = json.loads(out.getvalue())
    assert result["balance"] == "12.500000" and result["workspaceId"] == str(world.workspace.pk)
    entry = LedgerEntry.objects.get(pk=result["ledgerEntryId"])
    assert (entry.kind, entry.amount) == ("grant", Decimal("12.5"))
    assert AuditEvent.objects.filter(action="credits.granted", workspace=world.workspace).exists()


@pytest.mark.parametrize("amount", ["abc", "0", "-1", "1e40"])
def test_grant_credits_refuses_bad_amounts(world, amount):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("grant_credits", str(world.workspace.pk), amount, "--json", stdout=StringIO())
    assert balance(world.workspace) == 0


def test_credits_endpoint_is_for_the_owner(world):
    grant(world.workspace, "5")
    url = f"/api/w/{world.workspace.pk}/credits"
    response = client_for(world.owner).get(url)
    assert response.status_code == 200 and response.json()["balance"] == "5.000000"
    assert client_for(world.editor).get(url).status_code == 403
    assert client_for(world.outsider).get(url).status_code == 404


def test_owner_sets_member_and_role_quotas(world):
    base = f"/api/w/{world.workspace.pk}/credits"
    owner = client_for(world.owner)
    response = owner.put(f"{base}/member-quotas/{world.editor.pk}", {"limit": "10", "period": "week"}, format="json")
    assert (
        response.status_code == 200 and response.json()["limit"] == "10.000000" and response.json()["period"] == "week"
    )
    assert owner.put(f"{base}/role-quotas/editor", {"limit": 20}, format="json").json()["period"] == "month"
    assert owner.put(f"{base}/role-quotas/wizard", {"limit": 20}, format="json").status_code == 404
    assert owner.put(f"{base}/member-quotas/{world.outsider.pk}", {"limit": 1}, format="json").status_code == 404
    assert (
        error_code(owner.put(f"{base}/member-quotas/{world.editor.pk}", {"limit": -1}, format="json"))
        == "VALIDATION_ERROR"
    )
    assert (
        client_for(world.editor)
        .put(f"{base}/member-quotas/{world.editor.pk}", {"limit": 99}, format="json")
        .status_code
        == 403
    )
    listed = owner.get(base).json()
    assert [q["memberId"] for q in listed["memberQuotas"]] == [str(world.editor.pk)]
    assert [q["role"] for q in listed["roleQuotas"]] == ["editor"]
    assert owner.delete(f"{base}/role-quotas/editor").status_code == 204
    assert owner.delete(f"{base}/role-quotas/editor").status_code == 404
    assert AuditEvent.objects.filter(action="credits.member_quota_set").exists()


# --- charging, quotas ---------------------------------------------------------------------------
def test_charge_deducts_balance_member_quota_and_role_quota(world, agent, stub):
    grant(world.workspace, "100")
    quotas.set_member_quota(world.editor, limit=Decimal("50"), period="month", actor=None)
    quotas.set_role_quota(world.workspace, "editor", limit=Decimal("50"), period="month", actor=None)
    assert consolidate(world, agent)["status"] == "done"
    assert balance(world.workspace) == Decimal("100") - STUB_COST
    assert MemberQuota.objects.get().used == STUB_COST
    assert RoleQuota.objects.get().used == STUB_COST
    record = UsageRecord.objects.get()
    assert (record.member, record.role, record.status) == (world.editor, "editor", "pending")


def test_member_quota_is_exhausted_mid_period(world, agent, stub):
    grant(world.workspace, "100")
    quotas.set_member_quota(world.editor, limit=STUB_COST * 2, period="month", actor=None)
    assert [consolidate(world, agent)["status"] for _ in range(2)] == ["done", "done"]
    assert consolidate(world, agent) == {"status": "skipped", "reason": "member_quota"}
    # another member is not limited by the editor's quota
    assert consolidate(world, agent, member=world.owner)["status"] == "done"
    assert UsageRecord.objects.count() == 3


def test_role_quota_is_exhausted_mid_period_for_every_member_of_the_role(world, agent, stub):
    grant(world.workspace, "100")
    second_editor = actions.add_member(world.workspace, "editor2@acme.test", role="editor")
    quotas.set_role_quota(world.workspace, "editor", limit=STUB_COST * 2, period="day", actor=None)
    assert consolidate(world, agent)["status"] == "done"
    assert consolidate(world, agent, member=second_editor)["status"] == "done"
    assert consolidate(world, agent) == {"status": "skipped", "reason": "role_quota"}
    assert consolidate(world, agent, member=second_editor) == {"status": "skipped", "reason": "role_quota"}
    assert consolidate(world, agent, member=world.owner)["status"] == "done"


def test_a_quota_that_cannot_cover_the_cost_refuses_at_charge_time(world, agent, stub):
    grant(world.workspace, "100")
    quotas.set_member_quota(world.editor, limit=STUB_COST - Decimal("0.5"), period="month", actor=None)
    result = consolidate(world, agent)
    assert (result["status"], result["reason"]) == ("skipped", "member_quota")
    assert UsageRecord.objects.count() == 0 and balance(world.workspace) == Decimal("100")
    assert MemberQuota.objects.get().used == 0


def test_credits_that_cannot_cover_the_cost_refuse_at_charge_time(world, agent, stub):
    grant(world.workspace, "1")
    result = consolidate(world, agent)
    assert (result["status"], result["reason"]) == ("skipped", "credits")
    assert balance(world.workspace) == Decimal("1") and UsageRecord.objects.count() == 0


def test_quota_period_reset(world, agent, stub):
    grant(world.workspace, "100")
    with time_machine.travel(datetime(2026, 3, 30, 12, tzinfo=UTC), tick=False):
        quotas.set_member_quota(world.editor, limit=STUB_COST, period="month", actor=None)
        quotas.set_role_quota(world.workspace, "editor", limit=STUB_COST, period="month", actor=None)
        assert consolidate(world, agent)["status"] == "done"
        assert consolidate(world, agent)["reason"] == "member_quota"
        assert jobs.quota_reset() == {"reset": 0}
    with time_machine.travel(datetime(2026, 4, 1, 0, 5, tzinfo=UTC), tick=False):
        assert jobs.quota_reset() == {"reset": 2}
        assert jobs.quota_reset() == {"reset": 0}  # idempotent
        quota = MemberQuota.objects.get()
        assert quota.used == 0 and quota.period_start == datetime(2026, 4, 1, tzinfo=UTC)
        assert RoleQuota.objects.get().used == 0
        assert consolidate(world, agent)["status"] == "done"


def test_a_new_period_counts_as_fresh_before_the_reset_job_runs(world, agent, stub):
    grant(world.workspace, "100")
    with time_machine.travel(datetime(2026, 3, 30, 12, tzinfo=UTC), tick=False):
        quotas.set_member_quota(world.editor, limit=STUB_COST, period="day", actor=None)
        assert consolidate(world, agent)["status"] == "done"
        assert consolidate(world, agent)["reason"] == "member_quota"
    with time_machine.travel(datetime(2026, 3, 31, 0, 1, tzinfo=UTC), tick=False):
        assert consolidate(world, agent)["status"] == "done"
        assert MemberQuota.objects.get().used == STUB_COST


@pytest.mark.skipif(not on_postgres(), reason="backend: row locks need PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_parallel_consolidations_never_overdraw(world, agent):
    price_stub_model()
    grant(world.workspace, str(STUB_COST * 3 + Decimal("1.5")))  # room for exactly three
    ids = [
        Consolidation.objects.create(
            workspace=world.workspace,
            member=world.editor,
            agent=agent,
            conversation_id=f"c{i}",
            messages=user_says("hi"),
            message_count=2,
        ).pk
        for i in range(10)
    ]
    barrier = threading.Barrier(len(ids))
    results: dict[int, dict] = {}

    def worker(consolidation_id: int):
        try:
            barrier.wait()
            results[consolidation_id] = run_consolidation(consolidation_id, model=StubModel())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(cid,)) for cid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted((r["status"], r["reason"]) for r in results.values())
    assert statuses.count(("done", None)) == 3
    assert statuses.count(("skipped", "credits")) == 7
    assert balance(world.workspace) == Decimal("1.5")
    assert UsageRecord.objects.count() == 3
    assert jobs.reconcile_credits()["discrepancies"] == 0


@pytest.mark.skipif(not on_postgres(), reason="backend: row locks need PostgreSQL")
@pytest.mark.django_db(transaction=True)
def test_parallel_consolidations_respect_the_member_quota(world, agent):
    price_stub_model()
    grant(world.workspace, "1000")
    quotas.set_member_quota(world.editor, limit=STUB_COST * 2, period="month", actor=None)
    ids = [
        Consolidation.objects.create(
            workspace=world.workspace,
            member=world.editor,
            agent=agent,
            conversation_id=f"c{i}",
            messages=user_says("hi"),
            message_count=2,
        ).pk
        for i in range(6)
    ]
    barrier = threading.Barrier(len(ids))

    def worker(consolidation_id: int):
        try:
            barrier.wait()
            run_consolidation(consolidation_id, model=StubModel())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(cid,)) for cid in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert MemberQuota.objects.get().used == STUB_COST * 2
    assert UsageRecord.objects.count() == 2


# --- reply usage and the usage API ----------------------------------------------------------------
def _report(agent_client, **body):
    payload = {
        "conversationId": "conv-9",
        "model": "agent-model",
        "inputTokens": 1200,
        "outputTokens": 300,
        "memoryTokens": 150,
    } | body
    return agent_client.client.generic(
        "POST",
        "/api/agent/v1/usage/replies",
        json.dumps(payload),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent_client.token}",
    )


def test_reply_usage_is_recorded_with_the_ai_memory_note(world):
    ModelPrice.objects.create(model_name="agent-model", input_per_1k="2", output_per_1k="4")
    grant(world.workspace, "10")
    response = _report(make_agent(world.editor))
    assert response.status_code == 201, response.json()
    usage = response.json()["usage"]
    assert usage["category"] == "reply" and usage["total"] == "3.600000"
    assert (
        usage["lines"][0]["note"] == "This input includes about 150 tokens of AI memory, already counted in input usage"
    )
    assert balance(world.workspace) == Decimal("6.4")
    history = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/usage").json()["records"]
    assert history[0]["lines"][0]["note"].startswith("This input includes about 150 tokens of AI memory")


def test_reply_usage_validation(world):
    ModelPrice.objects.create(model_name="agent-model", input_per_1k="2", output_per_1k="4")
    client = make_agent(world.editor)
    assert error_code(_report(client, model="mystery")) == "UNKNOWN_MODEL"
    assert error_code(_report(client, memoryTokens=5000)) == "VALIDATION_ERROR"
    assert error_code(_report(client, inputTokens=-1)) == "VALIDATION_ERROR"
    assert error_code(_report(make_agent(world.editor, scopes=("memory:write",)))) == "INSUFFICIENT_SCOPE"
    client.token = "gam_000000000000_nope"
    assert _report(client).status_code == 401


def test_reply_usage_is_recorded_even_without_credits(world):
    """The reply was already delivered: its usage is debt, and consolidation stops until a grant."""
    ModelPrice.objects.create(model_name="agent-model", input_per_1k="2", output_per_1k="4")
    assert _report(make_agent(world.editor)).status_code == 201
    assert balance(world.workspace) == Decimal("-3.6")
    assert charging.precheck(world.workspace, world.editor) == "credits"


def test_usage_api_owner_sees_all_member_sees_own_with_filters(world, agent, stub):
    grant(world.workspace, "100")
    ModelPrice.objects.create(model_name="agent-model", input_per_1k="1", output_per_1k="1")
    consolidate(world, agent)
    consolidate(world, agent, member=world.owner)
    _report(make_agent(world.editor))
    url = f"/api/w/{world.workspace.pk}/usage"

    everything = client_for(world.owner).get(url).json()
    assert len(everything["records"]) == 3
    assert everything["totals"]["records"] == 3
    assert {s["category"] for s in everything["series"]} == {"ai_memory", "reply"}
    ai = [r for r in everything["records"] if r["category"] == "ai_memory"][0]
    assert ai["categoryLabel"] == "AI memory"
    assert [line["label"] for line in ai["lines"]] == ["AI memory (input)", "AI memory (output)"]

    owner = client_for(world.owner)
    assert len(owner.get(url, {"category": "ai_memory"}).json()["records"]) == 2
    assert len(owner.get(url, {"member": world.editor.pk}).json()["records"]) == 2
    assert len(owner.get(url, {"role": "owner"}).json()["records"]) == 1
    today = datetime.now(UTC)
    assert len(owner.get(url, {"period": today.strftime("%Y-%m")}).json()["records"]) == 3
    assert len(owner.get(url, {"period": (today - timedelta(days=40)).strftime("%Y-%m")}).json()["records"]) == 0
    assert error_code(owner.get(url, {"period": "last week"})) == "VALIDATION_ERROR"
    assert error_code(owner.get(url, {"category": "snacks"})) == "VALIDATION_ERROR"
    assert len(owner.get(url, {"limit": 1}).json()["records"]) == 1

    own = client_for(world.editor).get(url).json()["records"]
    assert {r["memberId"] for r in own} == {str(world.editor.pk)} and len(own) == 2
    assert client_for(world.editor).get(url, {"member": world.owner.pk}).json()["records"] == []
    assert client_for(world.viewer).get(url).json()["records"] == []
    assert client_for(world.outsider).get(url).status_code == 404


def test_usage_api_query_count_does_not_grow_with_records(world, agent, stub, django_assert_max_num_queries):
    grant(world.workspace, "1000")
    for _ in range(15):
        consolidate(world, agent)
    with django_assert_max_num_queries(8):
        assert len(client_for(world.owner).get(f"/api/w/{world.workspace.pk}/usage").json()["records"]) == 15


# --- beat jobs ------------------------------------------------------------------------------------
def _ledger():
    return sorted((e.workspace_id, e.kind, e.amount, e.usage_record_id) for e in LedgerEntry.objects.all())


def test_settlement_run_twice_gives_the_same_ledger(world, agent, stub):
    grant(world.workspace, "100")
    for _ in range(3):
        consolidate(world, agent)
    assert jobs.settle_usage() == {"settled": 3}
    first = _ledger()
    assert jobs.settle_usage() == {"settled": 0}
    assert _ledger() == first
    assert len([e for e in first if e[1] == "usage"]) == 3
    assert sum(e[2] for e in first) == balance(world.workspace)


def test_settlement_replayed_after_a_crash_writes_no_second_entry(world, agent, stub):
    grant(world.workspace, "100")
    consolidate(world, agent)
    jobs.settle_usage()
    # a crash after the ledger insert but before the status update leaves the record pending
    UsageRecord.objects.update(status="pending", settled_at=None)
    assert jobs.settle_usage() == {"settled": 1}
    assert LedgerEntry.objects.filter(kind="usage").count() == 1


def test_reconciliation_catches_a_tampered_balance_once(world, agent, stub):
    grant(world.workspace, "100")
    consolidate(world, agent)
    assert jobs.reconcile_credits()["discrepancies"] == 0  # pending usage is accounted for
    jobs.settle_usage()
    assert jobs.reconcile_credits()["discrepancies"] == 0
    CreditAccount.objects.filter(workspace=world.workspace).update(balance=Decimal("500"))
    assert jobs.reconcile_credits() == {"checked": 1, "discrepancies": 1, "recorded": 1}
    event = AuditEvent.objects.get(action="credits.discrepancy")
    assert event.workspace == world.workspace
    assert event.changes["difference"] == str(Decimal("500") - (Decimal("100") - STUB_COST))
    assert jobs.reconcile_credits()["recorded"] == 0  # idempotent: recorded once
    assert AuditEvent.objects.filter(action="credits.discrepancy").count() == 1
    CreditAccount.objects.filter(workspace=world.workspace).update(balance=Decimal("100") - STUB_COST)
    assert jobs.reconcile_credits()["recorded"] == 1
    assert AuditEvent.objects.filter(action="credits.reconciled").count() == 1


def test_daily_rollup_per_member_role_and_category_is_idempotent(world, agent, stub):
    grant(world.workspace, "100")
    ModelPrice.objects.create(model_name="agent-model", input_per_1k="1", output_per_1k="1")
    consolidate(world, agent)
    consolidate(world, agent)
    consolidate(world, agent, member=world.owner)
    _report(make_agent(world.editor))
    jobs.daily_rollup()
    rows = sorted(
        (r.member_ref, r.role, r.category, r.records, r.input_cost + r.output_cost) for r in UsageRollup.objects.all()
    )
    assert rows == sorted(
        [
            (world.editor.pk, "editor", "ai_memory", 2, STUB_COST * 2),
            (world.owner.pk, "owner", "ai_memory", 1, STUB_COST),
            (world.editor.pk, "editor", "reply", 1, Decimal("1.5")),
        ]
    )
    jobs.daily_rollup()
    assert (
        sorted(
            (r.member_ref, r.role, r.category, r.records, r.input_cost + r.output_cost)
            for r in UsageRollup.objects.all()
        )
        == rows
    )


def test_daily_rollup_catches_up_on_old_days(world, agent, stub):
    grant(world.workspace, "100")
    with time_machine.travel(datetime(2026, 1, 10, 9, tzinfo=UTC), tick=False):
        consolidate(world, agent)
    with time_machine.travel(datetime(2026, 2, 1, 9, tzinfo=UTC), tick=False):
        assert jobs.daily_rollup()["days"] == 1
        assert UsageRollup.objects.get().day.isoformat() == "2026-01-10"
        assert jobs.daily_rollup()["days"] == 0


def test_run_periodic_jobs_runs_the_credit_jobs(world, agent, stub):
    grant(world.workspace, "100")
    consolidate(world, agent)
    out = StringIO()
    call_command(
        "run_periodic_jobs",
        "--only",
        "settle_usage",
        "--only",
        "reconcile_credits",
        "--only",
        "daily_rollup",
        "--only",
        "quota_reset",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["settle_usage"] == {"settled": 1}
    assert result["reconcile_credits"]["discrepancies"] == 0


def test_money_is_never_a_float():
    with pytest.raises(ValueError):
        pricing.money(0.1)
    assert pricing.money("0.1") == Decimal("0.100000")


def test_a_workspace_with_credit_history_can_still_be_deleted(world, agent, stub):
    grant(world.workspace, "100")
    consolidate(world, agent)
    jobs.settle_usage()
    jobs.daily_rollup()
    actions.delete_workspace(world.workspace, actor=None)
    assert not LedgerEntry.objects.exists() and not UsageRecord.objects.exists() and not Consolidation.objects.exists()
