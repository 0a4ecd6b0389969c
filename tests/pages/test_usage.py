"""The usage page paginates its history (50 records a page, newest first); totals and the chart
cover every record; a page number that is no number or out of range never errors."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from credits.models import UsageRecord
from tests.pages.support import browser, text_of, url

pytestmark = pytest.mark.django_db


def records(world, member, count: int) -> list[UsageRecord]:
    now = timezone.now()
    return [
        UsageRecord.objects.create(
            workspace=world.workspace,
            member=member,
            role=member.role,
            category="ai_memory",
            model_name=f"model-{i:03d}",
            input_tokens=1000 + i,
            output_tokens=100,
            input_cost=Decimal("0.010"),
            output_cost=Decimal("0.002"),
            created_at=now - timedelta(hours=i),
        )
        for i in range(count)
    ]


def models_on(response) -> list[str]:
    return [row["record"].model_name for row in response.context["rows"]]


def test_the_history_shows_50_records_a_page_newest_first_and_totals_cover_all(world):
    records(world, world.owner, 60)
    first = browser(world.owner).get(url(world, "usage"))
    assert models_on(first) == [f"model-{i:03d}" for i in range(50)]
    assert first.context["totals"]["records"] == 60
    assert "Page 1 of 2" in text_of(first) and "?page=2" in text_of(first) and "?page=0" not in text_of(first)
    second = browser(world.owner).get(url(world, "usage"), {"page": "2"})
    assert models_on(second) == [f"model-{i:03d}" for i in range(50, 60)]
    assert "Page 2 of 2" in text_of(second) and "?page=1" in text_of(second)
    assert second.context["totals"]["records"] == 60 and second.context["chart"] is not None


def test_a_page_number_that_is_no_number_or_out_of_range_shows_a_real_page(world):
    records(world, world.owner, 55)
    for page, expected in (("abc", 50), ("", 50), ("-3", 5), ("999", 5), ("1e9", 50), ("２", 5)):
        response = browser(world.owner).get(url(world, "usage"), {"page": page})
        assert response.status_code == 200, page
        assert len(response.context["rows"]) == expected, page


def test_a_member_pages_through_their_own_records_only(world):
    records(world, world.editor, 3)
    records(world, world.owner, 70)
    response = browser(world.editor).get(url(world, "usage"))
    assert len(response.context["rows"]) == 3 and "Page 1 of" not in text_of(response)


def test_one_page_needs_no_pager(world):
    records(world, world.owner, 50)
    assert "Page 1 of" not in text_of(browser(world.owner).get(url(world, "usage")))


# --- the chart: credits per local day ----------------------------------------------------------------
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
LATE = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)  # 2 March 08:30 in Tokyo


def spent(world, at: datetime, cost: str = "1") -> UsageRecord:
    return UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.owner,
        role="owner",
        category="ai_memory",
        model_name="m",
        input_cost=Decimal(cost),
        output_cost=Decimal("0.25"),
        created_at=at,
    )


def bars(response) -> dict[date, Decimal]:
    return {bar["day"]: bar["value"] for bar in response.context["chart"]["bars"] if bar["value"]}


@pytest.mark.parametrize(("zone", "day"), [("UTC", date(2026, 3, 1)), ("Asia/Tokyo", date(2026, 3, 2))])
@time_machine.travel(NOW, tick=False)
def test_the_chart_counts_a_record_on_the_viewers_local_day(world, settings, zone, day):
    settings.TIME_ZONE = zone
    spent(world, LATE)
    spent(world, datetime(2026, 3, 2, 2, 0, tzinfo=UTC), cost="0.5")
    chart = browser(world.owner).get(url(world, "usage"))
    expected = (
        {date(2026, 3, 1): Decimal("1.25"), date(2026, 3, 2): Decimal("0.75")}
        if zone == "UTC"
        else {date(2026, 3, 2): Decimal("2.00")}
    )
    assert bars(chart) == expected and day in expected
    assert chart.context["chart"]["end"] == date(2026, 3, 2) and chart.context["chart"]["total"] == Decimal("2.00")


@time_machine.travel(NOW, tick=False)
def test_the_chart_starts_at_local_midnight_29_days_before_today(world, settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # 2 March in Tokyo: the chart runs 1 February to 2 March
    spent(world, datetime(2026, 1, 31, 14, 59, tzinfo=UTC))  # 31 January 23:59 in Tokyo: before the chart
    spent(world, datetime(2026, 1, 31, 15, 0, tzinfo=UTC), cost="2")  # 1 February 00:00 in Tokyo
    chart = browser(world.owner).get(url(world, "usage")).context["chart"]
    assert chart["start"] == date(2026, 2, 1)
    assert {bar["day"]: bar["value"] for bar in chart["bars"] if bar["value"]} == {date(2026, 2, 1): Decimal("2.25")}
    assert chart["total"] == Decimal("2.25")


# --- the lines and their AI-memory note --------------------------------------------------------------
@pytest.mark.parametrize(
    ("tokens", "english", "japanese"),
    [
        (1, "about 1 token of AI memory", "AI メモリ約 1 tokens"),
        (120, "about 120 tokens of AI memory", "AI メモリ約 120 tokens"),
    ],
)
def test_the_memory_note_is_singular_for_one_token_and_translated(world, tokens, english, japanese):
    UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role="editor",
        category="reply",
        model_name="m",
        input_tokens=5,
        memory_tokens=tokens,
    )
    response = browser(world.editor).get(url(world, "usage"))
    assert f"This input includes {english}, already counted in input usage" in text_of(response)
    assert f"この入力には {japanese} が含まれており、入力使用量に計上済みです" in text_of(
        browser(world.editor, language="ja").get(url(world, "usage"))
    )
    (row,) = response.context["rows"]
    assert [(str(line["label"]), line["tokens"], line["memory_tokens"]) for line in row["lines"]] == [
        ("Reply (input)", 5, tokens),
        ("Reply (output)", 0, 0),
    ]


def test_the_lead_and_the_member_column_follow_who_sees_all(world):
    spent(world, timezone.now())
    UsageRecord.objects.create(
        workspace=world.workspace, member=world.editor, role="editor", category="ai_memory", model_name="m"
    )
    owner, editor = browser(world.owner).get(url(world, "usage")), browser(world.editor).get(url(world, "usage"))
    assert (
        owner.context["sees_all"] is True
        and "Consumption history of every member" in text_of(owner)
        and ">Member</th>" in text_of(owner)
    )
    assert (
        editor.context["sees_all"] is False
        and "Your consumption history" in text_of(editor)
        and ">Member</th>" not in text_of(editor)
    )
