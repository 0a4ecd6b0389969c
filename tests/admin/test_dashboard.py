"""The admin index as a dashboard, checked against a known fixture; and every change list keeps
a bounded number of queries (no N+1) whatever the number of rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from credits import charging
from credits.models import UsageRecord
from governance import actions
from governance.admin_base import LargeTablePaginator
from governance.admin_dashboard import charts, workspace_figures
from memoryapp.models import MemoryVersion
from retention.erasure import erase_memories
from retention.models import DeletionReceipt
from tests.admin.support import admin_url, assert_no_content, browser, product_admins
from tests.support import make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def known(world, memories):
    """Acme: 3 members (one leaves), 2 active credentials (+1 revoked), 2 stored versions,
    forget ×1 (1 version) and member removal ×1 in the last 30 days, an older receipt outside
    the window, 100 credits granted and 0.75 used today."""
    make_agent(world.owner)
    revoked = make_agent(world.owner)
    from governance.models import Credential

    actions.revoke_credential(Credential.objects.filter(member=world.owner).order_by("-id").first(), actor=None)
    del revoked
    leaver = actions.add_member(world.workspace, "leaver@acme.test", role="viewer")
    forgotten = MemoryVersion.objects.create(
        workspace=world.workspace, member=world.owner, namespace="scratch", key="a", text="one"
    )
    erase_memories([forgotten.pk], operation="forget", workspace_id=world.workspace.pk, actor_label="test")
    removed = MemoryVersion.objects.create(
        workspace=world.workspace, member=leaver, namespace="scratch", key="b", text="two"
    )
    erase_memories([removed.pk], operation="member_removal", workspace_id=world.workspace.pk, actor_label="test")
    old = MemoryVersion.objects.create(
        workspace=world.workspace, member=world.owner, namespace="scratch", key="c", text="three"
    )
    receipt = erase_memories([old.pk], operation="expiry", workspace_id=world.workspace.pk, actor_label="test")
    DeletionReceipt.objects.filter(pk=receipt.pk).update(purged_at=timezone.now() - timedelta(days=45))
    actions.remove_member(leaver, actor=world.owner.user)
    charging.grant_credits(world.workspace, Decimal("100"))
    UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role="editor",
        category="ai_memory",
        model_name="m",
        input_cost=Decimal("0.5"),
        output_cost=Decimal("0.25"),
    )
    return world


def test_dashboard_figures_match_the_fixture(known):
    rows = {row.workspace.pk: row for row in workspace_figures()}
    acme = rows[known.workspace.pk]
    assert (
        acme.agent_memories_enabled is True
        and acme.workspace.ai_memory_available is True
        and acme.workspace.retains_history is True
    )
    assert acme.retention_days == 90
    assert acme.members.value == 3
    assert acme.credentials.value == 2
    assert acme.versions.value == 2
    assert {(e.operation, e.receipts, e.versions) for e in acme.erasures} == {
        ("forget", 1, 1),
        ("member_removal", 1, 1),
    }
    assert acme.balance.value == Decimal("100")
    globex = rows[known.other_workspace.pk]
    assert (globex.members.value, globex.credentials.value, globex.versions.value, globex.erasures) == (1, 0, 0, [])
    assert globex.balance.value is None


def test_dashboard_figures_link_to_the_filtered_change_lists_and_the_links_agree(known, staff):
    client = browser(staff.auditor)
    acme = {row.workspace.pk: row for row in workspace_figures()}[known.workspace.pk]
    members = client.get(acme.members.url).content.decode()
    assert "3 members" in members
    assert "2 credentials" in client.get(acme.credentials.url).content.decode()
    assert "2 memory versions" in client.get(acme.versions.url).content.decode()
    forget = next(e for e in acme.erasures if e.operation == "forget")
    assert "1 deletion receipt" in client.get(forget.url).content.decode()
    assert "1 credit account" in client.get(acme.balance.url).content.decode()


def test_the_index_renders_the_dashboard_with_svg_charts_and_no_external_assets(known, memories, staff):
    page = browser(staff.auditor).get("/admin/").content.decode()
    assert 'id="governance-dashboard"' in page
    assert page.count('<svg class="dashboard-chart"') == 3
    assert "cdn" not in page.lower() and '<script src="http' not in page
    assert f'data-workspace="{known.workspace.pk}"' in page
    assert 'data-operation="forget"' in page
    assert_no_content(page, memories)


def test_charts_count_per_day_over_30_days(known):
    remembers, erased, used = charts()
    today = timezone.localdate().isoformat()
    assert f"{today}: 2</title>" in remembers.svg  # the two stored canary versions
    assert f"{today}: 2</title>" in erased.svg  # forget + member removal; the 45-day-old receipt is out
    assert f"{today}: 0.75</title>" in used.svg
    assert remembers.svg.count("<rect") == 30


def test_dashboard_is_hidden_from_staff_without_view_permissions(known, db):
    from django.contrib.auth import get_user_model

    plain = get_user_model().objects.create_user(
        "plain@platform.test", "plain@platform.test", "pw-plain-123", is_staff=True
    )
    page = browser(plain).get("/admin/").content.decode()
    assert 'id="governance-dashboard"' not in page


def test_dashboard_queries_do_not_grow_with_workspaces(known, staff, django_assert_max_num_queries):
    client = browser(staff.auditor)
    client.get("/admin/")
    for i in range(12):
        actions.create_workspace(f"Extra {i}", owner_email=f"owner{i}@extra.test")
    with django_assert_max_num_queries(20):
        assert client.get("/admin/").status_code == 200


# --- change lists: bounded queries ------------------------------------------------------------
def _grow(world):
    """Add rows so that an N+1 would show: more members, credentials, memories, receipts, usage."""
    for i in range(8):
        member = actions.add_member(world.workspace, f"extra{i}@acme.test", role="editor")
        make_agent(member)
        for j in range(2):
            MemoryVersion.objects.create(
                workspace=world.workspace, member=member, namespace="notes", key=f"k{j}", text=f"note {i} {j}"
            )
        UsageRecord.objects.create(
            workspace=world.workspace, member=member, role="editor", category="ai_memory", model_name="m"
        )
        spare = MemoryVersion.objects.create(
            workspace=world.workspace, member=member, namespace="tmp", key="x", text="gone"
        )
        erase_memories(
            [spare.pk], operation="forget", workspace_id=world.workspace.pk, member_id=member.pk, actor_label="test"
        )


@pytest.mark.parametrize("role", ["auditor", "operator"])
def test_every_change_list_runs_a_bounded_number_of_queries(everything, staff, role, django_assert_max_num_queries):
    _grow(everything)
    client = browser(getattr(staff, role))
    for model, _ in product_admins():
        url = admin_url(model, "changelist")
        client.get(url)
        # 12, plus SAVEPOINT/RELEASE: the admin's lookup guard takes a savepoint inside the
        # test's transaction (requests in production run in autocommit and take none).
        with django_assert_max_num_queries(14, info=model.__name__):
            assert client.get(url).status_code == 200


def test_change_list_queries_are_the_same_for_3_and_30_rows(world, memories, staff, django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = browser(staff.auditor)
    url = admin_url(MemoryVersion, "changelist")
    client.get(url)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    _grow(world)
    with CaptureQueriesContext(connection) as many:
        client.get(url)
    assert len(many) == len(few)


def test_the_paginator_caps_the_count_and_says_so(world, staff, monkeypatch):
    monkeypatch.setattr(LargeTablePaginator, "CAP", 5)
    for i in range(7):
        MemoryVersion.objects.create(
            workspace=world.workspace, member=world.owner, namespace="bulk", key=f"k{i}", text="x"
        )
    page = browser(staff.auditor).get(admin_url(MemoryVersion, "changelist")).content.decode()
    assert "more than" in page and "5 memory versions" in page
    exact = (
        browser(staff.auditor)
        .get(admin_url(MemoryVersion, "changelist") + f"?member__id__exact={world.editor.pk}")
        .content.decode()
    )
    assert "more than" not in exact


@pytest.mark.parametrize(("zone", "late_day"), [("UTC", "2026-03-01"), ("Asia/Tokyo", "2026-03-02")])
def test_the_credits_chart_counts_a_record_on_the_local_day_from_local_midnight(world, settings, zone, late_day):
    settings.TIME_ZONE = zone
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    first_day = timezone.make_aware(datetime(2026, 2, 1))  # 29 days before today, at local midnight
    for at, cost in (
        (datetime(2026, 3, 1, 23, 30, tzinfo=UTC), "1"),
        (first_day, "2"),
        (first_day - timedelta(minutes=1), "4"),
    ):
        UsageRecord.objects.create(
            workspace=world.workspace,
            member=world.editor,
            role="editor",
            category="ai_memory",
            model_name="m",
            input_cost=Decimal(cost),
            output_cost=Decimal("0.25"),
            created_at=at,
        )
    used = charts(now)[2]
    assert f"{late_day}: 1.25</title>" in used.svg and "2026-02-01: 2.25</title>" in used.svg
    assert used.total == "3.5" and used.svg.count("<rect") == 30
