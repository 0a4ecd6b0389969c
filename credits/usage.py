"""Usage as the member and the owner read it (the usage API and page, the admin dashboard): whether
a member reads everyone's records (which ones: `UsageRecord.objects.restrict`), their totals, the
credits spent per day, a record's input and output lines, the AI-memory note (its one text: the
API's English and the pages' message id), the record's JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, tzinfo
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import translation
from django.utils.translation import gettext_noop, ngettext_lazy

from core.timestamps import iso
from credits.models import READ_ALL_USAGE, UsageCategory, UsageRecord
from credits.pricing import MONEY_SUM, ZERO
from governance.models import Member

#: The input/output line labels of a usage record, in English (the API) and as message ids that
#: pages translate.
LINE_LABELS = {
    UsageCategory.AI_MEMORY: (gettext_noop("AI memory (input)"), gettext_noop("AI memory (output)")),
    UsageCategory.REPLY: (gettext_noop("Reply (input)"), gettext_noop("Reply (output)")),
}
#: The AI-memory note of a record's input line (SPEC §9: "This input includes about N tokens of AI
#: memory, already counted in input usage"), singular for one token; `memory_note` writes it.
MEMORY_NOTE = ngettext_lazy(
    "This input includes about %(counter)s token of AI memory, already counted in input usage",
    "This input includes about %(counter)s tokens of AI memory, already counted in input usage",
    "counter",
)


def sees_all_usage(member: Member) -> bool:
    """Whether the member reads every member's usage in the workspace (`usage:read_all`, the
    owner) rather than only their own (which records: `UsageRecord.objects.restrict`)."""
    return member.has_perm(READ_ALL_USAGE)


def usage_totals(queryset: QuerySet[UsageRecord]) -> dict[str, Any]:
    """Records, tokens and costs of `queryset` (0 when it is empty), `total` = input + output cost."""
    zero = Value(ZERO, output_field=MONEY_SUM)
    totals = queryset.order_by().aggregate(
        records=Count("id"),
        inputTokens=Coalesce(Sum("input_tokens"), 0),
        outputTokens=Coalesce(Sum("output_tokens"), 0),
        memoryTokens=Coalesce(Sum("memory_tokens"), 0),
        inputCost=Coalesce(Sum("input_cost", output_field=MONEY_SUM), zero),
        outputCost=Coalesce(Sum("output_cost", output_field=MONEY_SUM), zero),
    )
    totals["total"] = totals["inputCost"] + totals["outputCost"]
    return totals


def daily_costs(
    queryset: QuerySet[UsageRecord], tz: tzinfo, *, since: date | None = None, by_category: bool = False
) -> list[dict[str, Any]]:
    """The credits spent per day (input + output cost) of `queryset`, oldest day first: rows
    `{"day": date, "cost": Decimal}`, with `by_category` one a day and category (`"category"`,
    in category order). The day is the record's `created_at` as a date in `tz`; `since` keeps
    the records from that day's midnight in `tz` on.

    `tz` is the surface's day: the usage API passes UTC (its days, like its `period`, are UTC
    days); the usage page and the admin dashboard pass the viewer's current time zone."""
    if since is not None:
        queryset = queryset.filter(created_at__gte=datetime.combine(since, time.min, tzinfo=tz))
    fields = ("day", "category") if by_category else ("day",)
    cost = Coalesce(
        Sum(F("input_cost") + F("output_cost"), output_field=MONEY_SUM), Value(ZERO, output_field=MONEY_SUM)
    )
    return list(
        queryset.order_by()
        .annotate(day=TruncDate("created_at", tzinfo=tz))
        .values(*fields)
        .annotate(cost=cost)
        .order_by(*fields)
    )


@dataclass(frozen=True)
class UsageLine:
    """One of a record's two lines. `label` is the English message id (the API's text, which
    pages translate); `memory_tokens`, on the input line only, the AI memory it includes."""

    label: str
    kind: str  # "input" or "output"
    tokens: int
    cost: Decimal
    memory_tokens: int = 0


def lines_of(record: UsageRecord) -> list[UsageLine]:
    """The record's input and output lines, labelled by its category (SPEC §9)."""
    input_label, output_label = LINE_LABELS.get(record.category, ("Input", "Output"))
    return [
        UsageLine(input_label, "input", record.input_tokens, record.input_cost, record.memory_tokens),
        UsageLine(output_label, "output", record.output_tokens, record.output_cost),
    ]


def usage_lines(record: UsageRecord) -> list[dict[str, Any]]:
    """The lines as the API writes them: the input line carries the AI-memory note."""
    result = []
    for line in lines_of(record):
        item: dict[str, Any] = {"label": line.label, "kind": line.kind, "tokens": line.tokens, "cost": str(line.cost)}
        if line.memory_tokens:
            item["memoryTokens"] = line.memory_tokens
            item["note"] = memory_note(record)
        result.append(item)
    return result


def memory_note(record: UsageRecord, *, translated: bool = False) -> str:
    """The note of the record's input line, "" without AI memory: in English (the API, whatever
    the request's language), or with `translated` in the active language (pages)."""
    if not record.memory_tokens:
        return ""
    if translated:
        return MEMORY_NOTE % {"counter": record.memory_tokens}
    with translation.override(None):
        return MEMORY_NOTE % {"counter": record.memory_tokens}


def usage_json(record: UsageRecord, *, own: bool = True) -> dict[str, Any]:
    """`own=False` (an owner reading another member's record): the conversation id, which the
    member's agent wrote, is left out; the figures stay."""
    return {
        "id": str(record.pk),
        "createdAt": iso(record.created_at),
        "category": record.category,
        "categoryLabel": UsageCategory(record.category).label,
        "memberId": str(record.member_id) if record.member_id else None,
        "role": record.role,
        "model": record.model_name,
        "conversationId": (record.conversation_id or None) if own else None,
        "lines": usage_lines(record),
        "total": str(record.total_cost),
        "status": record.status,
    }
