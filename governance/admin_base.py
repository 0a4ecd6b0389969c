"""Shared pieces of the admin console: read-only audit admins, governed actions with a reason
page, CSV export of the filtered list, and a paginator that never counts a huge table exactly.

Rules they enforce for every admin that uses them:

- a POST to a change list that does not name an action this user may run answers 403 (Django
  would only show "No action selected"), so "permissions are checked, not assumed";
- no query-string lookup, search, filter or ordering may reach a content-derived field (declared
  on the models, `governance/content.py`), through any relation and whatever the lookup type: the
  request answers 400, so a changelist's row count can never confirm a guess about content; a
  configuration that would (a search field, a filter, a sortable column) fails `manage.py check`;
- a lookup the database cannot run (a JSON `contains` on SQLite, an invalid regex) answers 400;
- a filter the change list cannot apply (an unknown field, a value of the wrong type) sends the
  change list to `?e=1` as Django does, and answers the CSV export a plain-text 400 naming it;
- a governed action asks for a reason on an intermediate page and calls the same action function
  the API uses, which writes the audit event.

Over ~400 lines on purpose: the one base every admin stands on; the rules above are enforced
together (a refused action, the reason page and the export all read the same permission).
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.core import checks
from django.core.exceptions import FieldError, PermissionDenied, SuspiciousOperation, ValidationError
from django.core.paginator import Paginator
from django.db import DatabaseError, connection, transaction
from django.db.models import Expression, F, Q, QuerySet
from django.http import HttpRequest, HttpResponseBadRequest, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.text import smart_split, unescape_string_literal

from governance.content import lookup_reaches_content, path_shows_content


# --- pagination ------------------------------------------------------------------------------
class LargeTablePaginator(Paginator):
    """Counts at most `CAP` rows of a filtered list; on PostgreSQL an unfiltered list uses the
    planner's estimate. Page links stay usable and the count query is bounded whatever the table
    size (1,000,000 memory versions and more). `is_estimate` tells the template to say "about"."""

    CAP = 10_000

    is_estimate = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not isinstance(queryset, QuerySet):
            return len(queryset)
        if connection.vendor == "postgresql" and not queryset.query.where:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass", [queryset.model._meta.db_table]
                )
                row = cursor.fetchone()
            estimate = int(row[0]) if row and row[0] is not None else -1
            if estimate > self.CAP:
                self.is_estimate = True
                return estimate
        capped = queryset.order_by()[: self.CAP + 1].count()
        if capped > self.CAP:
            self.is_estimate = True
            return self.CAP
        return capped


# --- reasons and governed actions --------------------------------------------------------------
class ReasonForm(forms.Form):
    reason = forms.CharField(
        label="Reason",
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        help_text="Recorded in the audit event.",
    )

    def clean_reason(self) -> str:
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("A reason is required.")
        return reason


@dataclass
class Summary:
    """A line of the confirmation page, e.g. ("Memory versions to erase", 1234)."""

    label: str
    value: Any


def governed_action(
    *,
    description: str,
    permission: str,
    perform: Callable[[Any, HttpRequest, Any, str], Any],
    summary: Callable[[QuerySet], Iterable[Summary]] | None = None,
    preview: Callable[[HttpRequest, QuerySet], Iterable[Summary]] | None = None,
    warning: str = "",
    done: str = "{count} done.",
):
    """Build an admin action that shows a reason form (and `summary` counts) first, then calls
    `perform(modeladmin, request, obj, reason)` for each selected row. `permission` is checked by
    `GovernedAdmin.get_actions` and again here. `preview(request, queryset)` is `summary` for an
    erase: the manifest it will write, computed by the action layer (which may audit that it
    was shown, the one write a preview makes)."""

    def action(modeladmin, request: HttpRequest, queryset: QuerySet):
        if not request.user.has_perm(permission):
            raise PermissionDenied
        form = ReasonForm(request.POST if request.POST.get("confirm") == "yes" else None)
        if form.is_bound and form.is_valid():
            count = 0
            for obj in queryset:
                perform(modeladmin, request, obj, form.cleaned_data["reason"])
                count += 1
            modeladmin.message_user(request, done.format(count=count), messages.SUCCESS)
            return None
        objects = list(queryset[:200])
        opts = modeladmin.model._meta
        context = {
            **modeladmin.admin_site.each_context(request),
            "title": description,
            "subtitle": None,
            "opts": opts,
            "app_label": opts.app_label,
            "action_name": action.__name__,
            "action_description": description,
            "objects": objects,
            "more": max(queryset.count() - len(objects), 0) if len(objects) == 200 else 0,
            "selected_ids": [str(pk) for pk in queryset.values_list("pk", flat=True)],
            "summary": list(preview(request, queryset)) if preview else list(summary(queryset)) if summary else [],
            "warning": warning,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        }
        return TemplateResponse(request, "admin/governed_action.html", context)

    action.__name__ = perform.__name__
    action.required_permission = permission  # type: ignore[attr-defined]
    return admin.action(description=description)(action)


# --- CSV export ------------------------------------------------------------------------------
class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_safe(value: Any) -> str:
    if value is None:
        return ""
    text = value.isoformat() if hasattr(value, "isoformat") else str(value)
    # Spreadsheets execute cells that start with these characters.
    if text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + text
    return text


# --- content stays closed ----------------------------------------------------------------------
class ContentLookupRefused(DisallowedModelAdminLookup):
    """A lookup, search or ordering that reaches a content-derived field: 400."""


class UnrunnableLookup(SuspiciousOperation):
    """A lookup the database refused to run (a JSON `contains` on SQLite, a bad regex): 400."""


def _ordering_names(ordering: Iterable[Any]) -> Iterator[str]:
    """Field paths an ordering sorts on: strings (`-text`, `?`) and the F() references inside
    expressions (`F("text").desc()`, `Lower("text")`)."""
    for item in ordering:
        if isinstance(item, str):
            if item != "?":
                yield item.lstrip("-+")
        elif isinstance(item, F):
            yield item.name
        elif isinstance(item, Expression) or hasattr(item, "get_source_expressions"):
            yield from _ordering_names(item.get_source_expressions())


def _display_names(admin_obj: admin.ModelAdmin, names: Iterable[Any]) -> Iterator[str]:
    for name in names:
        if isinstance(name, (list, tuple)):
            yield from _display_names(admin_obj, name)
        elif isinstance(name, str):
            yield name


def content_config_errors(admin_obj: admin.ModelAdmin) -> list[checks.CheckMessage]:
    """`manage.py check` refuses an admin configured to search, filter, order on or show
    content: the runtime guard would answer 400 anyway, but a column or filter that can only
    fail is a configuration error."""
    model = admin_obj.model
    errors: list[checks.CheckMessage] = []

    def error(message: str, code: int) -> None:
        errors.append(
            checks.Error(f"{type(admin_obj).__name__}: {message}", obj=type(admin_obj), id=f"governance.A{code:03d}")
        )

    for name in admin_obj.search_fields or ():
        if lookup_reaches_content(model, name.lstrip("^=@#")):
            error(f"search field {name!r} reaches memory content.", 1)
    for item in admin_obj.list_filter or ():
        name = item[0] if isinstance(item, (list, tuple)) else item
        if isinstance(name, str) and lookup_reaches_content(model, name):
            error(f"list filter {name!r} reaches memory content.", 2)
    for name in _ordering_names(admin_obj.ordering or ()):
        if lookup_reaches_content(model, name):
            error(f"ordering {name!r} reaches memory content.", 3)
    if admin_obj.date_hierarchy and lookup_reaches_content(model, admin_obj.date_hierarchy):
        error(f"date_hierarchy {admin_obj.date_hierarchy!r} reaches memory content.", 4)
    shown = list(_display_names(admin_obj, admin_obj.list_display or ()))
    shown += list(_display_names(admin_obj, admin_obj.fields or ()))
    shown += list(_display_names(admin_obj, admin_obj.readonly_fields or ()))
    shown += [
        accessor.replace(".", "__")
        for _, accessor in getattr(admin_obj, "csv_columns", ())
        if isinstance(accessor, str)
    ]
    for name in dict.fromkeys(shown):
        if path_shows_content(model, name):
            error(f"{name!r} would show memory content.", 5)
    for name in admin_obj.list_display or ():
        order_field = _column_ordering(admin_obj, name)
        # A model-field column (`text_length`) simply stops being sortable (get_sortable_by); a
        # callable that names a content field as its ordering is a mistake worth refusing.
        if callable(name) or (isinstance(name, str) and hasattr(admin_obj, name)):
            if order_field and lookup_reaches_content(model, order_field):
                error(f"column {name!r} sorts on memory content ({order_field}).", 6)
    return errors


def _column_ordering(admin_obj: admin.ModelAdmin, name: Any) -> str | None:
    """The field a list_display column sorts on (its own name, or a callable's ordering)."""
    if callable(name):
        attr = name
    elif isinstance(name, str) and hasattr(admin_obj, name):
        attr = getattr(admin_obj, name)
    else:
        return name if isinstance(name, str) else None
    order = getattr(attr, "admin_order_field", None)
    if isinstance(order, str):
        return order.lstrip("-")
    if order is not None:
        return next(iter(_ordering_names([order])), None)
    return None


class GuardedChangeList(ChangeList):
    def get_ordering(self, request, queryset):
        ordering = super().get_ordering(request, queryset)
        for name in _ordering_names(ordering):
            if lookup_reaches_content(self.model, name):
                raise ContentLookupRefused(f"Ordering on {name} is refused: it reaches memory content.")
        return ordering


class ContentGuardMixin:
    """Deny by default: no query-string lookup, search or ordering may reach a content-derived
    field, whatever the lookup type and through any relation (400), and a lookup the database
    cannot run answers 400 instead of failing while the page renders."""

    def lookup_allowed(self, lookup, value, request=None) -> bool:
        if lookup_reaches_content(self.model, lookup):
            return False
        return super().lookup_allowed(lookup, value, request)

    def get_sortable_by(self, request):
        sortable = super().get_sortable_by(request)
        return [
            name
            for name in sortable
            if not (
                isinstance(name, str)
                and (order := _column_ordering(self, name))
                and lookup_reaches_content(self.model, order)
            )
        ]

    def get_changelist(self, request, **kwargs):
        base = super().get_changelist(request, **kwargs)
        return (
            base
            if issubclass(base, GuardedChangeList)
            else type("Guarded" + base.__name__, (GuardedChangeList, base), {})
        )

    def get_search_results(self, request, queryset, search_term):
        if search_term:
            for name in self.get_search_fields(request):
                if lookup_reaches_content(self.model, name.lstrip("^=@#")):
                    raise ContentLookupRefused(f"Search on {name} is refused: it reaches memory content.")
        return super().get_search_results(request, queryset, search_term)

    def get_changelist_instance(self, request):
        try:
            # Inside a transaction, a savepoint keeps a refused query from aborting it (PostgreSQL).
            # Not otherwise: on SQLite every transaction takes the write lock up front.
            with transaction.atomic() if connection.in_atomic_block else nullcontext():
                changelist = super().get_changelist_instance(request)
                len(changelist.result_list)  # run the page's query here (cached for the template)
        except (IncorrectLookupParameters, SuspiciousOperation):
            raise
        except (DatabaseError, FieldError, ValidationError, ValueError, TypeError) as exc:
            raise UnrunnableLookup(f"The lookup cannot be run: {type(exc).__name__}") from None
        return changelist

    def check(self, **kwargs):
        return [*super().check(**kwargs), *content_config_errors(self)]


# --- the audited step -----------------------------------------------------------------------------
# --- the base admin --------------------------------------------------------------------------
def refuse_unknown_actions(model_admin: admin.ModelAdmin, request: HttpRequest) -> None:
    """A POST to a change list must name actions this user may run, else 403 (Django itself
    would redirect with "No action selected", hiding that permission was refused)."""
    if request.method == "POST":
        posted = [name for name in request.POST.getlist("action") if name]
        allowed = model_admin.get_actions(request)
        if not posted or any(name not in allowed for name in posted):
            raise PermissionDenied


class RefuseUnknownActionsMixin(ContentGuardMixin):
    """For Django's own admins (users, groups) in the console."""

    def changelist_view(self, request, extra_context=None):
        refuse_unknown_actions(self, request)
        return super().changelist_view(request, extra_context)


class GovernedAdmin(ContentGuardMixin, admin.ModelAdmin):
    """Read-only by default. Subclasses opt in to a change/add path explicitly; governed actions
    are filtered by their `required_permission`. `csv_columns` adds an "Export CSV" link that
    exports the filtered list."""

    change_list_template = "admin/governed_change_list.html"
    paginator = LargeTablePaginator
    show_full_result_count = False
    list_per_page = 50
    csv_columns: tuple[tuple[str, str | Callable[[Any], Any]], ...] = ()
    numbers_search_ids_only = False

    # -- permissions
    def has_add_permission(self, request, *args) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_actions(self, request):
        actions = super().get_actions(request)
        return {
            name: entry
            for name, entry in actions.items()
            if request.user.has_perm(getattr(entry[0], "required_permission", "-"))
        }

    def changelist_view(self, request, extra_context=None):
        refuse_unknown_actions(self, request)
        extra_context = dict(extra_context or {})
        if self.csv_columns:
            query = request.GET.copy()
            query.pop("p", None)
            opts = self.model._meta
            extra_context["export_csv_url"] = reverse(f"admin:{opts.app_label}_{opts.model_name}_export_csv") + (
                f"?{query.urlencode()}" if query else ""
            )
        return super().changelist_view(request, extra_context)

    # -- search: "#field" is an exact integer match (index-friendly; a non-number skips it),
    # "=field" exact, "^field" prefix, a bare name "contains". Terms are ANDed, fields ORed.
    def get_search_results(self, request, queryset, search_term):
        fields = self.get_search_fields(request)
        if not search_term or not fields:
            return queryset, False
        for bit in smart_split(search_term):
            if bit.startswith(('"', "'")) and bit[0] == bit[-1]:
                bit = unescape_string_literal(bit)
            term = Q()
            for name in fields:
                if self.numbers_search_ids_only and bit.isdigit() and not name.startswith("#"):
                    continue  # keeps a number search on the indexes of a huge table
                if name.startswith("#"):
                    if bit.isdigit() and len(bit) < 19:
                        term |= Q(**{name[1:]: int(bit)})
                elif name.startswith("="):
                    term |= Q(**{f"{name[1:]}__iexact": bit})
                elif name.startswith("^"):
                    term |= Q(**{f"{name[1:]}__istartswith": bit})
                else:
                    term |= Q(**{f"{name}__icontains": bit})
            queryset = queryset.filter(term) if term else queryset.none()
        return queryset, False

    # -- CSV export
    def get_urls(self):
        urls = super().get_urls()
        if not self.csv_columns:
            return urls
        opts = self.model._meta
        return [
            path(
                "export.csv",
                self.admin_site.admin_view(self.export_csv_view),
                name=f"{opts.app_label}_{opts.model_name}_export_csv",
            ),
            *urls,
        ]

    def export_csv_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters as exc:  # the change list redirects to ?e=1; a download cannot
            reason = str(exc).split(" Choices are", 1)[0].strip() or "invalid filter"
            return HttpResponseBadRequest(
                f"The export cannot apply the filters of this request ({reason}). Remove them: the change list shows "
                "the filters it accepts.\n",
                content_type="text/plain; charset=utf-8",
            )
        queryset = changelist.get_queryset(request)
        columns = self.csv_columns
        if any(
            isinstance(accessor, str) and path_shows_content(self.model, accessor.replace(".", "__"))
            for _, accessor in columns
        ):
            raise PermissionDenied  # also a check error (governance.A005): never exported

        def rows() -> Iterator[list[str]]:
            yield [header for header, _ in columns]
            for obj in queryset.iterator(chunk_size=2000):
                yield [_csv_safe(self._csv_value(obj, accessor)) for _, accessor in columns]

        writer = csv.writer(_Echo())
        response = StreamingHttpResponse(
            (writer.writerow(row) for row in rows()), content_type="text/csv; charset=utf-8"
        )
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = f'attachment; filename="{self.model._meta.model_name}-{stamp}.csv"'
        return response

    @staticmethod
    def _csv_value(obj: Any, accessor: str | Callable[[Any], Any]) -> Any:
        if callable(accessor):
            return accessor(obj)
        value = obj
        for part in accessor.split("."):
            value = getattr(value, part, None)
            if value is None:
                return None
        return value
