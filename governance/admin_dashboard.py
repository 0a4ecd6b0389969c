"""The admin index as a governance dashboard: per-workspace figures that link to the filtered
change lists, and server-rendered SVG charts of the last 30 days (no JavaScript, no CDN).

A fixed number of grouped queries whatever the number of workspaces shown (at most `LIMIT`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from django.db.models import Count, IntegerField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, TruncDate
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from credits.models import CreditAccount, UsageRecord
from credits.usage import daily_costs
from governance.admin_filters import last_days_query
from governance.models import Credential, Member, Workspace
from memoryapp.models import MemoryVersion
from retention.models import DeletionReceipt, Operation

LIMIT = 50
DAYS = 30


def _url(model_label: str, **params) -> str:
    url = reverse(f"admin:{model_label.replace('.', '_')}_changelist")
    return f"{url}?{urlencode(params)}" if params else url


@dataclass
class Figure:
    value: object
    url: str


@dataclass
class Erasures:
    operation: str
    label: str
    receipts: int
    versions: int
    url: str


@dataclass
class WorkspaceFigures:
    workspace: Workspace
    change_url: str
    agent_memories_enabled: bool | None
    retention_days: int | None
    members: Figure
    credentials: Figure
    versions: Figure
    erasures: list[Erasures] = field(default_factory=list)
    balance: Figure | None = None


@dataclass
class Chart:
    title: str
    total: object
    svg: SafeString
    url: str = ""


def _days(today: date) -> list[date]:
    return [today - timedelta(days=DAYS - 1 - i) for i in range(DAYS)]


def _as_date(value) -> date:
    return value.date() if isinstance(value, datetime) else value


def bar_chart(title: str, series: dict[date, float], days: list[date], *, unit: str = "", url: str = "") -> Chart:
    """A 30-bar SVG chart with a <title> per bar (the exact figure on hover)."""
    width, height, pad_left, pad_bottom, pad_top = 640, 140, 44, 18, 8
    plot_w, plot_h = width - pad_left - 4, height - pad_bottom - pad_top
    values = [float(series.get(day, 0)) for day in days]
    peak = max(values) if any(values) else 0.0
    slot = plot_w / len(days)
    bars = []
    for i, (day, value) in enumerate(zip(days, values)):
        h = 0.0 if peak == 0 else max(value / peak * plot_h, 1.0 if value else 0.0)
        x = pad_left + i * slot + 1
        y = pad_top + plot_h - h
        label = f"{day.isoformat()}: {value:g}{unit}"
        bars.append((f"{x:.1f}", f"{y:.1f}", f"{max(slot - 2, 1):.1f}", f"{h:.1f}", label))
    bar_markup = format_html_join(
        "", '<rect x="{}" y="{}" width="{}" height="{}" fill="#417690"><title>{}</title></rect>', bars
    )
    total = sum(values)
    svg = format_html(
        '<svg class="dashboard-chart" role="img" aria-label="{title}" viewBox="0 0 {w} {h}" width="100%" '
        'preserveAspectRatio="xMinYMin meet" xmlns="http://www.w3.org/2000/svg">'
        '<line x1="{pl}" y1="{base}" x2="{w}" y2="{base}" stroke="#999"/>'
        '<text x="{tx}" y="{ty}" font-size="10" text-anchor="end" fill="#666">{peak}</text>'
        '<text x="{tx}" y="{base}" font-size="10" text-anchor="end" fill="#666">0</text>'
        "{bars}"
        '<text x="{pl}" y="{h2}" font-size="10" fill="#666">{first}</text>'
        '<text x="{w4}" y="{h2}" font-size="10" text-anchor="end" fill="#666">{last}</text>'
        "</svg>",
        title=title,
        w=width,
        h=height,
        pl=pad_left,
        base=f"{pad_top + plot_h:.1f}",
        tx=pad_left - 4,
        ty=pad_top + 8,
        peak=f"{peak:g}",
        bars=bar_markup,
        h2=height - 4,
        w4=width - 4,
        first=days[0].isoformat(),
        last=days[-1].isoformat(),
    )
    return Chart(title=title, total=f"{total:g}{unit}", svg=svg, url=url)


def workspace_figures(now: datetime | None = None, limit: int = LIMIT) -> list[WorkspaceFigures]:
    now = now or timezone.now()
    # The same window as the charts and the receipts link: from local midnight DAYS-1 days ago.
    since = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=DAYS - 1)
    workspaces = list(Workspace.objects.select_related("ask_history").order_by("id")[:limit])
    ids = [w.pk for w in workspaces]
    members = dict(
        Member.objects.active()
        .filter(workspace_id__in=ids)
        .values("workspace_id")
        .annotate(n=Count("pk"))
        .values_list("workspace_id", "n")
    )
    credentials = dict(
        Credential.objects.active(now)
        .filter(workspace_id__in=ids)
        .values("workspace_id")
        .annotate(n=Count("pk"))
        .values_list("workspace_id", "n")
    )
    versions = dict(
        MemoryVersion.objects.filter(workspace_id__in=ids)
        .values("workspace_id")
        .annotate(n=Count("pk"))
        .values_list("workspace_id", "n")
    )
    erasures: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    receipt_rows = (
        DeletionReceipt.objects.filter(workspace_ref__in=ids, purged_at__gte=since)
        .values("workspace_ref", "operation")
        .annotate(receipts=Count("pk"), versions=Sum(Cast(KT("manifest__artifacts__memory_version"), IntegerField())))
        .order_by("workspace_ref", "operation")
    )
    for row in receipt_rows:
        erasures[row["workspace_ref"]].append((row["operation"], row["receipts"], row["versions"] or 0))
    balances = {a.workspace_id: a for a in CreditAccount.objects.filter(workspace_id__in=ids)}

    labels = dict(Operation.choices)
    recent = last_days_query("purged_at", DAYS)
    result = []
    for workspace in workspaces:
        ask_history = getattr(workspace, "ask_history", None)
        figures = WorkspaceFigures(
            workspace=workspace,
            change_url=reverse("admin:governance_workspace_change", args=[workspace.pk]),
            agent_memories_enabled=ask_history.agent_memories_enabled if ask_history else None,
            retention_days=ask_history.agent_memory_retention_days if ask_history else None,
            members=Figure(
                members.get(workspace.pk, 0), _url("governance.member", workspace__id__exact=workspace.pk, active="yes")
            ),
            credentials=Figure(
                credentials.get(workspace.pk, 0),
                _url("governance.credential", workspace__id__exact=workspace.pk, status="active"),
            ),
            versions=Figure(
                versions.get(workspace.pk, 0), _url("memoryapp.memoryversion", workspace__id__exact=workspace.pk)
            ),
            erasures=[
                Erasures(
                    op,
                    labels.get(op, op),
                    receipts,
                    erased,
                    _url("retention.deletionreceipt", workspace=workspace.pk, operation__exact=op, **recent),
                )
                for op, receipts, erased in erasures.get(workspace.pk, [])
            ],
        )
        account = balances.get(workspace.pk)
        figures.balance = Figure(
            account.balance if account else None, _url("credits.creditaccount", workspace__id__exact=workspace.pk)
        )
        result.append(figures)
    return result


def charts(now: datetime | None = None) -> list[Chart]:
    now = now or timezone.now()
    today = timezone.localdate(now)
    days = _days(today)
    since = timezone.make_aware(datetime.combine(days[0], datetime.min.time()))

    remembers = {
        _as_date(row["day"]): row["n"]
        for row in MemoryVersion.objects.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("pk"))
        .order_by()
    }
    erased = {
        _as_date(row["day"]): row["n"] or 0
        for row in DeletionReceipt.objects.filter(purged_at__gte=since)
        .annotate(day=TruncDate("purged_at"))
        .values("day")
        .annotate(n=Sum(Cast(KT("manifest__artifacts__memory_version"), IntegerField())))
        .order_by()
    }
    credits = {
        row["day"]: row["cost"]
        for row in daily_costs(UsageRecord.objects.all(), timezone.get_current_timezone(), since=days[0])
    }
    return [
        bar_chart(
            "Memory versions written per day (still stored)",
            remembers,
            days,
            url=_url("memoryapp.memoryversion", **last_days_query("created_at", DAYS)),
        ),
        bar_chart(
            "Memory versions erased per day (deletion receipts)",
            erased,
            days,
            url=_url("retention.deletionreceipt", **last_days_query("purged_at", DAYS)),
        ),
        bar_chart(
            "Credits used per day (usage records)",
            credits,
            days,
            url=_url("credits.usagerecord", **last_days_query("created_at", DAYS)),
        ),
    ]
