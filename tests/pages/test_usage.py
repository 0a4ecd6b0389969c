"""The usage page paginates its history (50 records a page, newest first); totals and the chart
cover every record; a page number that is no number or out of range never errors."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from credits.models import UsageRecord
from tests.pages.test_access_and_forms import browser, text_of, url

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
