"""Login throttling that nobody can use to lock the owner out (docs/privacy.md).

- **Per address and account: a limit.** After 5 failed attempts for one username from one client
  address within 15 minutes, further attempts for it from that address are refused until the
  window passes. An attacker's failures from their address never refuse anyone at another one.
- **Per account, from every address: a slow-down, never a refusal.** The account's failures from
  all addresses are counted too (same window); past the first 10, every attempt on the account
  waits before its password is checked — 0.5 s, doubling per further failure, at most 5 s. An
  attacker rotating addresses gets one guess per 5 s per connection; the real owner, from an
  address of their own, waits at most 5 s and is let in. The wait is decided before the password
  is checked, so it tells nothing about whether a password was right; a success clears both
  counts. It is imposed before the log-in view runs: under ASGI by `memoryapp.middleware.
  login_slowdown`, which wraps the whole ASGI application and awaits the wait on the event loop,
  so a waiting attempt holds no thread (a sleeping view would hold one of the few threads the
  process runs every synchronous view on, and a handful of slowed attempts would stall every
  page); under WSGI (and Django's test client) by `LoginSlowdownMiddleware` in the worker's own
  thread, which is how a WSGI worker waits anyway.
- **The client address** is REMOTE_ADDR, or behind a reverse proxy (`TRUSTED_PROXY_HOPS` = the
  number of proxies in front) the address the nearest trusted proxy appended to X-Forwarded-For:
  counted by the proxy's own address, an attacker anywhere would share the owner's limit.

Counters live in the shared cache (Redis in production), so every web process sees the same
counts. `sleep` and `asleep` are the module's to replace (tests record the delays instead of waiting)."""

from __future__ import annotations

import asyncio
import hashlib
import time
import unicodedata
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

MAX_FAILURES = 5
WINDOW_SECONDS = 15 * 60
ACCOUNT_FREE_FAILURES = 10
ACCOUNT_BASE_DELAY = 0.5
ACCOUNT_MAX_DELAY = 5.0

asleep: Callable[[float], Awaitable[None]] = asyncio.sleep
sleep: Callable[[float], None] = time.sleep


def _username(username: str) -> str:
    """The account a posted login names, spelled as the login form reads it (NFKC, like Django's
    UsernameField): a full-width or composed re-spelling is the same account, so the same count."""
    return unicodedata.normalize("NFKC", username).strip().lower()


def _key(username: str, address: str) -> str:
    digest = hashlib.sha256(f"{_username(username)}|{address}".encode()).hexdigest()
    return f"login-failures:{digest}"


def _account_key(username: str) -> str:
    return f"login-account-failures:{hashlib.sha256(_username(username).encode()).hexdigest()}"


def client_address(request: HttpRequest | None) -> str:
    """The address the limit counts: with `TRUSTED_PROXY_HOPS` = n, the n-th entry from the right
    of X-Forwarded-For (what the nearest trusted proxy saw; entries further left are the client's
    to write), else REMOTE_ADDR."""
    if request is None:
        return ""
    hops = getattr(settings, "TRUSTED_PROXY_HOPS", 0)
    if hops:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return request.META.get("REMOTE_ADDR", "")


def account_failures(username: str) -> int:
    return int(cache.get(_account_key(username)) or 0)


def account_delay(failures: int) -> float:
    """Seconds an attempt on an account waits, given its recent failures from every address."""
    if failures < ACCOUNT_FREE_FAILURES:
        return 0.0
    return min(ACCOUNT_MAX_DELAY, ACCOUNT_BASE_DELAY * 2 ** (failures - ACCOUNT_FREE_FAILURES))


def pending_delay(username: str) -> float:
    """How long the next attempt on this account waits."""
    return account_delay(account_failures(username))


async def apending_delay(username: str) -> float:
    """`pending_delay` for the event loop (the ASGI wrapper)."""
    return account_delay(int(await cache.aget(_account_key(username)) or 0))


def _count_failure(key: str) -> None:
    try:
        cache.incr(key)
    except ValueError:
        cache.set(key, 1, WINDOW_SECONDS)


class ThrottledLoginMixin:
    """For AuthenticationForm subclasses (it needs `self.request`)."""

    def clean(self):
        username = self.data.get("username", "") or ""
        pair_key, account_key = _key(username, client_address(getattr(self, "request", None))), _account_key(username)
        if (cache.get(pair_key) or 0) >= MAX_FAILURES:
            raise ValidationError(_("Too many failed log-in attempts. Try again in 15 minutes."), code="throttled")
        try:
            cleaned = super().clean()
        except ValidationError:
            _count_failure(pair_key)
            _count_failure(account_key)
            raise
        cache.delete_many([pair_key, account_key])
        return cleaned
