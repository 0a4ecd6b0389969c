"""Login throttling: after 5 failed attempts for one username from one address within 15
minutes, further attempts are refused until the window passes. Counters live in the shared
cache (Redis in production), so every web process sees the same count."""

from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

MAX_FAILURES = 5
WINDOW_SECONDS = 15 * 60


def _key(username: str, address: str) -> str:
    digest = hashlib.sha256(f"{username.strip().lower()}|{address}".encode()).hexdigest()
    return f"login-failures:{digest}"


class ThrottledLoginMixin:
    """For AuthenticationForm subclasses (it needs `self.request`)."""

    def clean(self):
        username = self.data.get("username", "") or ""
        address = self.request.META.get("REMOTE_ADDR", "") if getattr(self, "request", None) else ""
        key = _key(username, address)
        if (cache.get(key) or 0) >= MAX_FAILURES:
            raise ValidationError(_("Too many failed log-in attempts. Try again in 15 minutes."), code="throttled")
        try:
            cleaned = super().clean()
        except ValidationError:
            try:
                cache.incr(key)
            except ValueError:
                cache.set(key, 1, WINDOW_SECONDS)
            raise
        cache.delete(key)
        return cleaned
