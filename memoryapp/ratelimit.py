"""Per-credential rolling-hour limits, exact under concurrency and across processes: 120 remembers
(SPEC §4.7) and, each in a budget of its own, MEMORY_READS_PER_HOUR reads (recall and list) and
AGENT_TURNS_PER_HOUR conversation turns (each turn screens up to MAX_MASKED_CHARS of messages;
see the README's "Limits").

Redis (production): one sorted set per credential, trimmed, counted and appended by one Lua
script, so the check and the admission are a single atomic step on the server's clock.
Database (embedded default): the same on a table, serialised by a row lock (PostgreSQL) or by
SQLite's IMMEDIATE transactions. A slot is handed back only if the remember it admitted fails;
forgetting a memory never gives quota back. Each budget ("bucket") counts on its own: turns
never use up remembers, nor the other way round.
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Min
from django.utils import timezone

from core.errors import ApiError
from governance.models import Credential
from memoryapp.models import RateLimitSlot

WINDOW_SECONDS = 3600  # the SPEC's rolling hour: settings.RATE_LIMIT_WINDOW_SECONDS (tests and demos may shorten it)


def window_seconds() -> int:
    return settings.RATE_LIMIT_WINDOW_SECONDS


@dataclass
class Slot:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int
    handle: str = ""
    credential_id: int = 0
    bucket: str = "remember"

    def headers(self) -> dict[str, str]:
        headers = {"RateLimit-Limit": str(self.limit), "RateLimit-Remaining": str(self.remaining), "RateLimit-Reset": str(self.reset_seconds)}
        if not self.allowed:
            headers["Retry-After"] = str(max(1, self.reset_seconds))
        return headers


READ_BUCKET = "read"
TURN_BUCKET = "turn"


def rate_limited(slot: Slot, operation: str, message: str) -> ApiError:
    """The 429 of an exhausted budget: ``details.operation`` names it ("remember", "read",
    "turn"), with the RateLimit-* headers and Retry-After."""
    return ApiError(429, "AGENT_MEMORY_RATE_LIMITED", message, {"operation": operation, "retryAfterSeconds": slot.reset_seconds}, headers=slot.headers())


def unavailable() -> ApiError:
    # Writes never become unlimited: no counter, no remember.
    return ApiError(503, "RATE_LIMIT_UNAVAILABLE", "The rate limiter is unavailable; try again shortly.", headers={"Retry-After": "5"})


_LUA = """
local key = KEYS[1]
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local member = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed = 0
if count < limit then
  redis.call('ZADD', key, now, member)
  count = count + 1
  allowed = 1
end
redis.call('PEXPIRE', key, math.floor(window / 1000) + 1000)
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local reset = 0
if oldest[2] then reset = tonumber(oldest[2]) + window - now end
return {allowed, count, reset}
"""


class RedisRateLimiter:
    def __init__(self, url: str):
        import redis

        self._client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._script = self._client.register_script(_LUA)

    @staticmethod
    def _key(credential_id: int, bucket: str = "remember") -> str:
        return f"ratelimit:{bucket}:{credential_id}"

    def acquire(self, credential_id: int, limit: int, bucket: str = "remember") -> Slot:
        import redis

        handle = uuid.uuid4().hex
        try:
            allowed, count, reset_us = self._script(keys=[self._key(credential_id, bucket)], args=[window_seconds() * 1_000_000, limit, handle])
        except redis.RedisError as exc:
            raise unavailable() from exc
        return Slot(bool(allowed), limit, max(0, limit - int(count)), math.ceil(int(reset_us) / 1_000_000), handle, credential_id, bucket)

    def refund(self, slot: Slot) -> None:
        import redis

        try:
            self._client.zrem(self._key(slot.credential_id, slot.bucket), slot.handle)
        except redis.RedisError:
            pass  # the slot then simply ages out with the window

    def reset(self, credential_id: int, bucket: str = "remember") -> None:
        self._client.delete(self._key(credential_id, bucket))


class DatabaseRateLimiter:
    def acquire(self, credential_id: int, limit: int, bucket: str = "remember") -> Slot:
        now = timezone.now()
        window = timedelta(seconds=window_seconds())
        window_start = now - window
        with transaction.atomic():
            Credential.objects.select_for_update().filter(pk=credential_id).exists()
            hits_q = RateLimitSlot.objects.filter(credential_id=credential_id, bucket=bucket)
            hits_q.filter(at__lte=window_start).delete()
            # One row, whatever the budget: the read budget's 1,200 timestamps are not fetched per read.
            window_hits = hits_q.aggregate(count=Count("pk"), oldest=Min("at"))
            count, oldest = window_hits["count"], window_hits["oldest"] or now
            allowed = count < limit
            handle = ""
            if allowed:
                handle = str(RateLimitSlot.objects.create(credential_id=credential_id, bucket=bucket, at=now).pk)
                count += 1
        reset = math.ceil((oldest + window - now).total_seconds())
        return Slot(allowed, limit, max(0, limit - count), max(0, reset), handle, credential_id, bucket)

    def refund(self, slot: Slot) -> None:
        if slot.handle:
            RateLimitSlot.objects.filter(pk=int(slot.handle)).delete()

    def reset(self, credential_id: int, bucket: str = "remember") -> None:
        RateLimitSlot.objects.filter(credential_id=credential_id, bucket=bucket).delete()


@functools.cache
def _limiter(backend: str, url: str | None):
    return RedisRateLimiter(url) if backend == "redis" else DatabaseRateLimiter()


def get_limiter() -> RedisRateLimiter | DatabaseRateLimiter:
    return _limiter(settings.RATE_LIMIT_BACKEND, settings.REDIS_URL)


@contextmanager
def spend_slot(credential_id: int, limit: int, *, bucket: str = "remember", what: str = "remembers") -> Iterator[Slot]:
    """Admit one unit of work against the credential's rolling-hour budget: 429
    `AGENT_MEMORY_RATE_LIMITED` (with `Retry-After`) when it is spent; the slot is handed back if
    the work inside fails, so the limit counts work done (a remember's 409 carries the headers).
    The one rule behind SPEC §2 row 11 and the turns' budget."""
    limiter = get_limiter()
    slot = limiter.acquire(credential_id, limit, bucket=bucket)
    if not slot.allowed:
        raise rate_limited(slot, bucket, f"At most {slot.limit} {what} per credential per hour.")
    try:
        yield slot
    except BaseException as exc:
        limiter.refund(slot)
        if isinstance(exc, ApiError) and exc.status == 409:
            exc.headers.update(slot.headers())
        raise
