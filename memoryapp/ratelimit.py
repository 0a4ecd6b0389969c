"""Per-credential rolling-hour limits, exact under concurrency and across processes: 120 remembers
(SPEC §4.7) and, each in a budget of its own, MEMORY_READS_PER_HOUR reads (recall and list) and
AGENT_TURNS_PER_HOUR conversation turns (each turn screens up to MAX_MASKED_CHARS of messages;
see docs/limits.md).

Redis (production): one sorted set per credential, trimmed, counted and appended by one Lua
script, so the check and the admission are a single atomic step on the server's clock.
Database (embedded default): the same on a table, serialised by a row lock (PostgreSQL) or by
SQLite's IMMEDIATE transactions. A slot is handed back only if the remember it admitted fails;
forgetting a memory never gives quota back. Each budget ("bucket") counts on its own: turns
never use up remembers, nor the other way round.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from core import backends
from core.errors import ApiError
from governance.models import Credential, Member
from memoryapp.models import RateLimitSlot

WINDOW_SECONDS = 3600  # the SPEC's rolling hour: settings.RATE_LIMIT_WINDOW_SECONDS (tests and demos may shorten it)


def window_seconds() -> int:
    return settings.RATE_LIMIT_WINDOW_SECONDS


def expired_slots(now: datetime):
    """The embedded limiter's rows the window has let go (at or before `now` − the window): they
    count for no credential and no member any more. The cascade sweep purges them; the limiter
    trims its own as it goes."""
    return RateLimitSlot.objects.filter(at__lte=now - timedelta(seconds=window_seconds()))


@dataclass
class Slot:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int
    handle: str = ""
    credential_id: int = 0
    bucket: str = "remember"
    member_id: int = 0  # the member charged beside the credential (0: none)

    def headers(self) -> dict[str, str]:
        headers = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }
        if not self.allowed:
            headers["Retry-After"] = str(max(1, self.reset_seconds))
        return headers


READ_BUCKET = "read"
TURN_BUCKET = "turn"
KNOWLEDGE_BUCKET = "knowledge"  # a member's knowledge writes (no credential: members write knowledge)


def rate_limited(slot: Slot, operation: str, message: str) -> ApiError:
    """The 429 of an exhausted budget: ``details.operation`` names it ("remember", "read",
    "turn"), with the RateLimit-* headers and Retry-After."""
    return ApiError(
        429,
        "AGENT_MEMORY_RATE_LIMITED",
        message,
        {"operation": operation, "retryAfterSeconds": slot.reset_seconds},
        headers=slot.headers(),
    )


def unavailable() -> ApiError:
    # Writes never become unlimited: no counter, no remember.
    return ApiError(
        503,
        "RATE_LIMIT_UNAVAILABLE",
        "The rate limiter is unavailable; try again shortly.",
        headers={"Retry-After": "5"},
    )


_LUA = """
local window = tonumber(ARGV[1])
local handle = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function spent(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  return redis.call('ZCARD', key)
end
local binding = KEYS[1]
local remaining = tonumber(ARGV[2]) - spent(KEYS[1])
if KEYS[2] then
  local member_remaining = tonumber(ARGV[4]) - spent(KEYS[2])
  if member_remaining < remaining then
    remaining = member_remaining
    binding = KEYS[2]
  end
end
local allowed = 0
if remaining > 0 then
  for _, key in ipairs(KEYS) do redis.call('ZADD', key, now, handle) end
  remaining = remaining - 1
  allowed = 1
end
for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, math.floor(window / 1000) + 1000) end
local oldest = redis.call('ZRANGE', binding, 0, 0, 'WITHSCORES')
local reset = 0
if oldest[2] then reset = tonumber(oldest[2]) + window - now end
return {allowed, remaining, reset}
"""


@dataclass(frozen=True)
class MemberBound:
    """The anti-cycling bound of a budget: what the member's credentials spent
    together, revoked and expired ones included, against `limit` = the budget × the member's
    usable credentials. Each live credential keeps its full SPEC §4.7 budget, and a fresh
    credential never brings a fresh one: a member admits at most the budget × the most
    credentials they hold at once (MAX_CREDENTIALS_PER_MEMBER), cycling or not."""

    member_id: int
    limit: int


def member_bound(credential: Credential, limit: int) -> MemberBound:
    # Counted with the credential when the gate loaded it (CredentialQuerySet.with_usable_siblings).
    usable = getattr(credential, "usable_siblings", None)
    if usable is None:
        usable = Credential.objects.active().filter(member_id=credential.member_id).count()
    return MemberBound(credential.member_id, limit * max(1, usable))


class RedisRateLimiter:
    def __init__(self, url: str | None = None):
        import redis

        self._client = redis.Redis.from_url(url or settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        self._script = self._client.register_script(_LUA)

    @staticmethod
    def _key(credential_id: int, bucket: str = "remember") -> str:
        return f"ratelimit:{bucket}:{credential_id}"

    @staticmethod
    def _member_key(member_id: int, bucket: str = "remember") -> str:
        return f"ratelimit:{bucket}:member:{member_id}"

    def _keys(self, slot: Slot) -> list[str]:
        return [self._key(slot.credential_id, slot.bucket)] + (
            [self._member_key(slot.member_id, slot.bucket)] if slot.member_id else []
        )

    def acquire(
        self, credential_id: int, limit: int, bucket: str = "remember", member: MemberBound | None = None
    ) -> Slot:
        import redis

        handle = uuid.uuid4().hex
        keys, args = [self._key(credential_id, bucket)], [window_seconds() * 1_000_000, limit, handle]
        if member is not None:
            keys.append(self._member_key(member.member_id, bucket))
            args.append(member.limit)
        try:
            allowed, remaining, reset_us = self._script(keys=keys, args=args)
        except redis.RedisError as exc:
            raise unavailable() from exc
        return Slot(
            bool(allowed),
            limit,
            max(0, int(remaining)),
            math.ceil(int(reset_us) / 1_000_000),
            handle,
            credential_id,
            bucket,
            member.member_id if member else 0,
        )

    def acquire_member(self, member_id: int, limit: int, bucket: str) -> Slot:
        """A budget of the member alone (no credential): the same script on one key."""
        import redis

        handle = uuid.uuid4().hex
        try:
            allowed, remaining, reset_us = self._script(
                keys=[self._member_key(member_id, bucket)], args=[window_seconds() * 1_000_000, limit, handle]
            )
        except redis.RedisError as exc:
            raise unavailable() from exc
        return Slot(
            bool(allowed),
            limit,
            max(0, int(remaining)),
            math.ceil(int(reset_us) / 1_000_000),
            handle,
            0,
            bucket,
            member_id,
        )

    def refund(self, slot: Slot) -> None:
        import redis

        try:
            for key in self._keys(slot):
                self._client.zrem(key, slot.handle)
        except redis.RedisError:
            pass  # the slot then simply ages out with the window

    def reset(self, credential_id: int, bucket: str = "remember") -> None:
        """Forget the credential's spending and its member's (tests and benches)."""
        member_id = Credential.objects.filter(pk=credential_id).values_list("member_id", flat=True).first()
        self._client.delete(
            self._key(credential_id, bucket), *([self._member_key(member_id, bucket)] if member_id else [])
        )


class DatabaseRateLimiter:
    """The check and the admission are ONE conditional INSERT (one database round trip): the slot
    is written only if the credential's and the member's slots inside the window leave room, and
    the statement answers the counts the headers need. SQLite runs a
    writing statement under its write lock from its first step, so the statement is exact under
    concurrency by itself; PostgreSQL (a statement's snapshot is taken when it starts) first takes
    the member's (else the credential's) row lock, then runs it. Slots older than the window count
    for nothing and are left to the cascade sweep (`expired_slots`)."""

    _TABLE = RateLimitSlot._meta.db_table

    def acquire(
        self, credential_id: int, limit: int, bucket: str = "remember", member: MemberBound | None = None
    ) -> Slot:
        connection = transaction.get_connection()
        now = timezone.now()
        window = timedelta(seconds=window_seconds())
        after = connection.ops.adapt_datetimefield_value(now - window)
        member_id = member.member_id if member else None
        spent = f"FROM {self._TABLE} WHERE {{}} = %s AND bucket = %s AND at > %s"
        by_credential, by_member = spent.format("credential_id"), spent.format("member_id")
        credential_params, member_params = [credential_id, bucket, after], [member_id, bucket, after]
        room, room_params = f"(SELECT count(*) {by_credential}) < %s", [*credential_params, limit]
        if member is not None:
            room += f" AND (SELECT count(*) {by_member}) < %s"
            room_params += [*member_params, member.limit]
        insert = f"INSERT INTO {self._TABLE} (credential_id, member_id, bucket, at) SELECT %s, %s, %s, %s WHERE {room}"
        insert_params = [credential_id, member_id, bucket, connection.ops.adapt_datetimefield_value(now), *room_params]
        if connection.vendor == "postgresql":
            with transaction.atomic():
                if member is not None:
                    Member.objects.select_for_update().filter(pk=member.member_id).exists()
                else:
                    Credential.objects.select_for_update().filter(pk=credential_id).exists()
                # The counts are read before the INSERT (one snapshot): the slot written is added.
                row = self._run(
                    f"WITH ins AS ({insert} RETURNING id), c AS (SELECT count(*) AS n, min(at) AS oldest "
                    f"{by_credential}), m AS (SELECT count(*) AS n, min(at) AS oldest {by_member}) SELECT (SELECT id "
                    "FROM ins), c.n + (SELECT count(*) FROM ins), c.oldest, m.n + (SELECT count(*) FROM ins), "
                    "m.oldest FROM c, m",
                    [*insert_params, *credential_params, *member_params],
                )
        else:
            # RETURNING's subqueries see the row just inserted.
            counts = (
                f"(SELECT count(*) {by_credential}), (SELECT min(at) {by_credential}), "
                f"(SELECT count(*) {by_member}), (SELECT min(at) {by_member})"
            )
            row = self._run(
                f"{insert} RETURNING id, {counts}",
                [*insert_params, *credential_params, *credential_params, *member_params, *member_params],
            )
            if row is None:  # refused, nothing written: the counts for the headers
                row = (
                    None,
                    *self._run(
                        f"SELECT {counts}", [*credential_params, *credential_params, *member_params, *member_params]
                    ),
                )
        handle, credential_count, credential_oldest, member_count, member_oldest = row
        remaining, oldest = limit - credential_count, credential_oldest
        if member is not None and member.limit - member_count < remaining:
            remaining, oldest = member.limit - member_count, member_oldest
        if isinstance(oldest, str):  # SQLite answers a text
            oldest = connection.ops.convert_datetimefield_value(oldest, None, connection)
        reset = math.ceil(((oldest or now) + window - now).total_seconds())
        return Slot(
            handle is not None,
            limit,
            max(0, remaining),
            max(0, reset),
            "" if handle is None else str(handle),
            credential_id,
            bucket,
            member_id or 0,
        )

    def acquire_member(self, member_id: int, limit: int, bucket: str) -> Slot:
        """A budget of the member alone (no credential: `credential_id` 0), serialised by the
        member's row lock like the member bound above."""
        now = timezone.now()
        window = timedelta(seconds=window_seconds())
        with transaction.atomic():
            Member.objects.select_for_update().filter(pk=member_id).exists()
            slots = RateLimitSlot.objects.filter(member_id=member_id, bucket=bucket)
            slots.filter(at__lte=now - window).delete()
            spent = slots.aggregate(count=models.Count("pk"), oldest=models.Min("at"))
            remaining, oldest = limit - spent["count"], spent["oldest"] or now
            handle = ""
            if remaining > 0:
                handle = str(
                    RateLimitSlot.objects.create(credential_id=0, member_id=member_id, bucket=bucket, at=now).pk
                )
                remaining -= 1
        reset = math.ceil((oldest + window - now).total_seconds())
        return Slot(bool(handle), limit, max(0, remaining), max(0, reset), handle, 0, bucket, member_id)

    @staticmethod
    def _run(sql: str, params: list):
        connection = transaction.get_connection()
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def refund(self, slot: Slot) -> None:
        if slot.handle:
            RateLimitSlot.objects.filter(pk=int(slot.handle)).delete()

    def reset(self, credential_id: int, bucket: str = "remember") -> None:
        RateLimitSlot.objects.filter(credential_id=credential_id, bucket=bucket).delete()


def get_limiter() -> RedisRateLimiter | DatabaseRateLimiter:
    """The limiter RATE_LIMIT_BACKEND configures (core.backends)."""
    return backends.load("RATE_LIMIT_BACKEND")


def take_slot(credential: Credential, limit: int, *, bucket: str = "remember") -> Slot:
    """One unit of `bucket` for the credential: charged to the credential (its SPEC §4.7 budget,
    which the RateLimit-* headers describe; `remaining` is the tighter of the two) and to its
    member (`member_bound`), so revoking a spent credential and creating another buys nothing."""
    return get_limiter().acquire(credential.pk, limit, bucket=bucket, member=member_bound(credential, limit))


@contextmanager
def spend_slot(
    credential: Credential, limit: int, *, bucket: str = "remember", what: str = "remembers"
) -> Iterator[Slot]:
    """Admit one unit of work against the credential's (and its member's) rolling-hour budget:
    429 `AGENT_MEMORY_RATE_LIMITED` (with `Retry-After`) when it is spent; the slot is handed back
    if the work inside fails, so the limit counts work done (a remember's 409 carries the headers).
    The one rule behind SPEC §2 row 11 and the turns' budget."""
    limiter = get_limiter()
    slot = take_slot(credential, limit, bucket=bucket)
    if not slot.allowed:
        raise rate_limited(slot, bucket, f"At most {slot.limit} {what} per credential per hour.")
    try:
        yield slot
    except BaseException as exc:
        limiter.refund(slot)
        if isinstance(exc, ApiError) and exc.status == 409:
            exc.headers.update(slot.headers())
        raise


def take_member_slot(member: Member, limit: int, *, bucket: str = KNOWLEDGE_BUCKET) -> Slot:
    """One unit of the member's own rolling-window budget `bucket` (knowledge writes: a member acts
    through the workspace API, not a credential). 429 `AGENT_MEMORY_RATE_LIMITED` with the
    RateLimit-* headers and `Retry-After` when it is spent; `refund` hands it back."""
    slot = get_limiter().acquire_member(member.pk, limit, bucket)
    if not slot.allowed:
        raise rate_limited(slot, bucket, f"At most {slot.limit} {bucket} writes per member per hour.")
    return slot


def refund(slot: Slot) -> None:
    get_limiter().refund(slot)
