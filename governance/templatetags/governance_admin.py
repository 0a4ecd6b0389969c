"""`{% governance_dashboard as dashboard %}`: the admin index's figures and charts."""

from __future__ import annotations

from django import template
from django.core.cache import cache

from governance.admin_dashboard import LIMIT, charts, workspace_figures

register = template.Library()

CHARTS_CACHE_KEY = "admin-dashboard-charts-v1"
CHARTS_CACHE_SECONDS = 120


@register.simple_tag(takes_context=True)
def governance_dashboard(context) -> dict | None:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.has_perm("governance.view_workspace"):
        return None
    rows = workspace_figures()
    # The per-day counts scan the last 30 days of large tables: cached briefly. They are counts
    # only (no memory content ever enters a cache).
    chart_list = cache.get(CHARTS_CACHE_KEY)
    if chart_list is None:
        chart_list = charts()
        cache.set(CHARTS_CACHE_KEY, chart_list, CHARTS_CACHE_SECONDS)
    return {
        "workspaces": rows,
        "charts": chart_list,
        "limited": len(rows) >= LIMIT,
        "show_balance": any(row.balance is not None for row in rows),
    }
