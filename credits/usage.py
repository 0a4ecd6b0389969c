"""Usage as the member and the owner read it (the usage API and page): which records a member may
read, their totals, a record's input and output lines, the AI-memory note, the record's JSON."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, DecimalField, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_noop

from core.timestamps import iso
from credits.models import CREDIT_DIGITS, CREDIT_PLACES, UsageCategory, UsageRecord
from credits.pricing import ZERO
from governance.models import Member

#: The input/output line labels of a usage record, in English (the API) and as message ids that
#: pages translate.
LINE_LABELS = {
    UsageCategory.AI_MEMORY: (gettext_noop("AI memory (input)"), gettext_noop("AI memory (output)")),
    UsageCategory.REPLY: (gettext_noop("Reply (input)"), gettext_noop("Reply (output)")),
}
MEMORY_NOTE = "This input includes about {n} tokens of AI memory, already counted in input usage"


def visible_usage(member: Member) -> QuerySet[UsageRecord]:
    """The usage records a member may read: the workspace's with `usage:read_all`, else their own."""
    queryset = UsageRecord.objects.filter(workspace_id=member.workspace_id)
    return queryset if member.has_perm("usage:read_all") else queryset.filter(member=member)


def usage_totals(queryset: QuerySet[UsageRecord]) -> dict[str, Any]:
    """Records, tokens and costs of `queryset` (0 when it is empty), `total` = input + output cost."""
    money = DecimalField(max_digits=CREDIT_DIGITS + 4, decimal_places=CREDIT_PLACES)  # a sum may pass one record's digits
    zero = Value(ZERO, output_field=money)
    totals = queryset.order_by().aggregate(
        records=Count("id"),
        inputTokens=Coalesce(Sum("input_tokens"), 0),
        outputTokens=Coalesce(Sum("output_tokens"), 0),
        memoryTokens=Coalesce(Sum("memory_tokens"), 0),
        inputCost=Coalesce(Sum("input_cost", output_field=money), zero),
        outputCost=Coalesce(Sum("output_cost", output_field=money), zero),
    )
    totals["total"] = totals["inputCost"] + totals["outputCost"]
    return totals


def usage_lines(record: UsageRecord) -> list[dict[str, Any]]:
    input_label, output_label = LINE_LABELS.get(record.category, ("Input", "Output"))
    input_line: dict[str, Any] = {"label": input_label, "kind": "input", "tokens": record.input_tokens, "cost": str(record.input_cost)}
    if record.memory_tokens:
        input_line["memoryTokens"] = record.memory_tokens
        input_line["note"] = memory_note(record)
    return [input_line, {"label": output_label, "kind": "output", "tokens": record.output_tokens, "cost": str(record.output_cost)}]


def memory_note(record: UsageRecord) -> str:
    return MEMORY_NOTE.format(n=record.memory_tokens) if record.memory_tokens else ""


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
