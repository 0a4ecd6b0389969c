"""Usage (SPEC §9): the usage records the member may see, their totals and the chart."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from credits import usage as credit_usage
from credits.models import UsageRecord
from governance.models import Member
from memoryapp.pages import presenters
from memoryapp.pages.charts import usage_chart
from memoryapp.pages.views.base import member_page, page

# Usage records per page, newest first; `?page=N` (a page that is no number or out of range shows
# the first or the last page, never an error).
USAGE_PAGE_SIZE = 50


@require_GET
@member_page()
def usage(request: HttpRequest, member: Member) -> HttpResponse:
    queryset = UsageRecord.objects.restrict(member, "view")
    page_obj = Paginator(
        queryset.select_related("member__user").order_by("-created_at", "-id"), USAGE_PAGE_SIZE
    ).get_page(request.GET.get("page"))
    records = list(page_obj.object_list)
    totals = credit_usage.usage_totals(queryset)
    return page(
        request,
        member,
        "pages/usage.html",
        {
            "rows": presenters.usage_rows(records),
            "page_obj": page_obj,
            "sees_all": credit_usage.sees_all_usage(member),
            "totals": totals,
            "chart": usage_chart(queryset, timezone.get_current_timezone())
            if records
            else None,  # the viewer's local days
        },
        current="pages:usage",
    )
