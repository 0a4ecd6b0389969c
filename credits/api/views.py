"""Credits, quotas and the usage history (SPEC §9) on the workspace API.

- `GET /api/w/:wsId/credits` (`credits:manage`, the owner): balance, prices, quotas, recent ledger.
- `PUT, DELETE /api/w/:wsId/credits/member-quotas/:memberId` `{limit, period}` (`credits:manage`).
- `PUT, DELETE /api/w/:wsId/credits/role-quotas/:role` `{limit, period}` (`credits:manage`).
- `GET /api/w/:wsId/usage` — the owner (`usage:read_all`) sees every member's usage, anyone else
  only their own. Filters: `member`, `role`, `category`, `period` (`YYYY-MM` or `YYYY-MM-DD`),
  `since`/`until` (ISO-8601); `limit` (1–200, default 50) and `offset`.
Amounts are strings of decimals (credits), never floats.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from core.errors import not_found, validation_error
from core.fields import StrictSerializer
from core.params import query_int
from core.timestamps import RANGE_MESSAGE, InvalidInstant, check_range
from credits import charging, quotas, usage
from credits.models import CREDIT_DIGITS, CREDIT_PLACES, QuotaPeriod, UsageCategory, UsageRecord
from governance.api.base import WorkspaceAPIView
from governance.models import Member
from governance.permissions import ROLE_CHOICES

ROLES = [value for value, _ in ROLE_CHOICES]


class QuotaBody(StrictSerializer):
    limit = serializers.DecimalField(
        max_digits=CREDIT_DIGITS, decimal_places=CREDIT_PLACES, min_value=0, coerce_to_string=True
    )
    period = serializers.ChoiceField(choices=QuotaPeriod.values, required=False, default=QuotaPeriod.MONTH)


class CreditsView(WorkspaceAPIView):
    permissions = {"GET": "credits:manage"}

    def get(self, request, ws_id):
        return Response(charging.credits_summary(self.workspace))


class MemberQuotaView(WorkspaceAPIView):
    permissions = {"PUT": "credits:manage", "DELETE": "credits:manage"}

    def _member(self, member_id: int) -> Member:
        return self.get_scoped(Member.objects.active(), member_id, "member")

    @extend_schema(request=QuotaBody, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, ws_id, member_id):
        member = self._member(member_id)
        data = self.body(request, QuotaBody)
        quota = quotas.set_member_quota(member, limit=data["limit"], period=data["period"], actor=request.user)
        return Response({"memberId": str(member.pk), **quotas.quota_json(quota)})

    def delete(self, request, ws_id, member_id):
        if not quotas.delete_member_quota(self._member(member_id), actor=request.user):
            raise not_found("quota")
        return Response(status=204)


class RoleQuotaView(WorkspaceAPIView):
    permissions = {"PUT": "credits:manage", "DELETE": "credits:manage"}

    @staticmethod
    def _role(role: str) -> str:
        if role not in ROLES:
            raise not_found("role")
        return role

    @extend_schema(request=QuotaBody, responses={200: OpenApiTypes.OBJECT})
    def put(self, request, ws_id, role):
        role = self._role(role)
        data = self.body(request, QuotaBody)
        quota = quotas.set_role_quota(
            self.workspace, role, limit=data["limit"], period=data["period"], actor=request.user
        )
        return Response({"role": role, **quotas.quota_json(quota)})

    def delete(self, request, ws_id, role):
        if not quotas.delete_role_quota(self.workspace, self._role(role), actor=request.user):
            raise not_found("quota")
        return Response(status=204)


# --- usage history ---------------------------------------------------------------------------------
class InstantFormField(IsoDateTimeField):
    """`since`/`until`: ISO-8601 instants, in the range `core.timestamps` accepts."""

    def clean(self, value: Any) -> datetime | None:
        try:
            parsed = super().clean(value)
            return check_range(parsed) if parsed is not None else None
        except (InvalidInstant, OverflowError) as exc:
            raise forms.ValidationError(str(exc) if isinstance(exc, InvalidInstant) else RANGE_MESSAGE) from None


class InstantFilter(django_filters.IsoDateTimeFilter):
    field_class = InstantFormField


class UsageFilter(django_filters.FilterSet):
    member = django_filters.NumberFilter(field_name="member_id")
    role = django_filters.ChoiceFilter(choices=ROLE_CHOICES)
    category = django_filters.ChoiceFilter(choices=UsageCategory.choices)
    since = InstantFilter(field_name="created_at", lookup_expr="gte")
    until = InstantFilter(field_name="created_at", lookup_expr="lt")
    period = django_filters.CharFilter(method="filter_period")

    class Meta:
        model = UsageRecord
        fields = ["member", "role", "category", "since", "until", "period"]

    def filter_period(self, queryset: Any, name: str, value: str) -> Any:
        start, end = parse_period(value)
        return queryset.filter(created_at__gte=start, created_at__lt=end)


def parse_period(value: str) -> tuple[datetime, datetime]:
    """`YYYY-MM` → that month; `YYYY-MM-DD` → that day (UTC)."""
    try:
        if len(value) == 7:
            start = check_range(datetime.strptime(value, "%Y-%m").replace(tzinfo=UTC))
            return start, check_range(quotas.period_end(QuotaPeriod.MONTH, start))
        if len(value) == 10:
            start = check_range(datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC))
            return start, check_range(start + timedelta(days=1))
    except (ValueError, OverflowError):  # InvalidInstant is a ValueError
        pass
    raise validation_error({"period": ["Use YYYY-MM or YYYY-MM-DD."]})


class UsageView(WorkspaceAPIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(n, str, required=False)
            for n in ("member", "role", "category", "period", "since", "until", "limit", "offset")
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, ws_id):
        filterset = UsageFilter(request.query_params, queryset=UsageRecord.objects.restrict(self.member, "view"))
        if not filterset.is_valid():
            raise validation_error({k: [str(e) for e in v] for k, v in filterset.errors.items()})
        queryset = filterset.qs.order_by("-created_at", "-id")
        params = request.query_params
        limit = query_int(params, "limit", default=50, minimum=1, maximum=200)
        offset = query_int(params, "offset", default=0, minimum=0, maximum=10**9)
        page = list(queryset[offset : offset + limit + 1])
        totals = usage.usage_totals(queryset)
        series = usage.daily_costs(queryset, UTC, by_category=True)  # the API's days are UTC days, like `period`
        return Response(
            {
                "records": [usage.usage_json(r, own=r.member_id == self.member.pk) for r in page[:limit]],
                "nextOffset": offset + limit if len(page) > limit else None,
                "totals": {
                    **{k: v for k, v in totals.items() if not k.endswith("Cost") and k != "total"},
                    "inputCost": str(totals["inputCost"]),
                    "outputCost": str(totals["outputCost"]),
                    "total": str(totals["total"]),
                },
                "series": [
                    {"day": row["day"].isoformat(), "category": row["category"], "cost": str(row["cost"])}
                    for row in series
                ],
            }
        )
