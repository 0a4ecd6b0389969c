"""Chart geometry for the pages: SVG coordinates computed on the server (no script, SPEC §7)."""

from __future__ import annotations

from datetime import date, timedelta, tzinfo
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from credits.models import UsageRecord
from credits.usage import daily_costs

CHART_DAYS = 30
CHART_WIDTH, CHART_HEIGHT = 720, 200
CHART_LEFT, CHART_BOTTOM, CHART_TOP = 56, 28, 12


def nice_max(value: Decimal) -> Decimal:
    """The top of the value axis: the next 1, 2 or 5 × a power of ten at or above `value`."""
    if value <= 0:
        return Decimal(1)
    magnitude = Decimal(10) ** (len(str(int(value))) - 1) if value >= 1 else Decimal("0.1") ** max(1, -value.adjusted())
    for step in (1, 2, 5, 10):
        if value <= magnitude * step:
            return magnitude * step
    return magnitude * 10


def usage_chart(queryset: QuerySet[UsageRecord], tz: tzinfo, today: date | None = None) -> dict[str, Any]:
    """Credits per day over the last 30 days, the days (and today) as seen in `tz`."""
    today = today or timezone.localdate(timezone=tz)
    start = today - timedelta(days=CHART_DAYS - 1)
    totals: dict[date, Decimal] = {row["day"]: row["cost"] for row in daily_costs(queryset, tz, since=start)}
    top = nice_max(max(totals.values(), default=Decimal(0)))
    plot_w = CHART_WIDTH - CHART_LEFT - 8
    plot_h = CHART_HEIGHT - CHART_BOTTOM - CHART_TOP
    slot = plot_w / CHART_DAYS
    bars = []
    for i in range(CHART_DAYS):
        day = start + timedelta(days=i)
        value = totals.get(day, Decimal(0))
        height = float(value / top) * plot_h if top else 0
        bars.append(
            {
                "x": round(CHART_LEFT + i * slot + slot * 0.15, 2),
                "y": round(CHART_TOP + plot_h - height, 2),
                "width": round(slot * 0.7, 2),
                "height": round(height, 2),
                "day": day,
                "value": value,
                "label_x": round(CHART_LEFT + i * slot + slot / 2, 2),
                "show_label": i % 5 == 0 or i == CHART_DAYS - 1,
            }
        )
    grid = [{"y": round(CHART_TOP + plot_h - plot_h * f, 2), "value": top * Decimal(str(f))} for f in (0, 0.5, 1)]
    return {
        "bars": bars,
        "grid": grid,
        "width": CHART_WIDTH,
        "height": CHART_HEIGHT,
        "left": CHART_LEFT,
        "right": CHART_WIDTH - 8,
        "baseline": CHART_TOP + plot_h,
        "label_y": CHART_HEIGHT - 8,
        "total": sum(totals.values(), Decimal(0)),
        "start": start,
        "end": today,
    }
