"""`{{ value|moment }}` and `{% moment value %}`: one way to write an instant on every member page.

One format per language, always with the time and the time zone. The tag wraps it in
`<time datetime="…">` with the ISO form, so a reader's tools and the tests see the exact instant."""

from __future__ import annotations

from datetime import date, datetime

from django import template
from django.utils import dateformat, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import get_language

register = template.Library()

#: Django date-format characters per language: (the day, the time of day). `T` is the zone's
#: abbreviation (UTC). A calendar day (a chart's bar) is written as the day and the zone.
MOMENT_FORMATS = {
    "en": ("M j, Y", "H:i T"),
    "ja": ("Y年n月j日", "H:i T"),
}
_JOIN = {"en": ", ", "ja": " "}


def _language() -> str:
    language = (get_language() or "en").split("-")[0]
    return language if language in MOMENT_FORMATS else "en"


@register.filter
def moment(value: date | None) -> str:
    """The instant in the current time zone, in the reader's language; a date as that day in
    the current zone; "" for nothing."""
    language = _language()
    day, clock = MOMENT_FORMATS[language]
    if isinstance(value, datetime):
        if timezone.is_aware(value):
            value = timezone.localtime(value)
        return dateformat.format(value, day + _JOIN[language] + clock)
    if isinstance(value, date):
        return f"{dateformat.format(value, day)} {timezone.get_current_timezone_name()}"
    return ""


@register.simple_tag(name="moment")
def moment_tag(value: date | None) -> SafeString:
    if not isinstance(value, date):
        return format_html("")
    return format_html('<time datetime="{}">{}</time>', value.isoformat(), moment(value))
