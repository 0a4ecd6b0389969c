"""Helpers of the limiter tests (no tests here; the fixtures are in conftest.py): the two stored
windows the `window` fixture wraps, where Redis is, and how to use up or age an agent's hour."""

from __future__ import annotations

import os
from datetime import timedelta

from django.conf import settings as django_settings
from django.utils import timezone

from memoryapp import ratelimit
from memoryapp.models import RateLimitSlot
from memoryapp.ratelimit import get_limiter
from tests.support import AgentClient


def redis_url() -> str | None:
    return django_settings.REDIS_URL or os.environ.get("MUTATION_REDIS_URL")


class DatabaseWindow:
    def __init__(self):
        self.limiter = ratelimit.DatabaseRateLimiter()

    @staticmethod
    def _rows(credential_id: int | None, bucket: str, member_id: int | None = None):
        rows = RateLimitSlot.objects.filter(bucket=bucket)
        return rows.filter(member_id=member_id) if member_id is not None else rows.filter(credential_id=credential_id)

    def age(
        self,
        credential_id: int | None,
        seconds: float,
        count: int | None = None,
        bucket: str = "remember",
        *,
        member_id: int | None = None,
    ) -> None:
        hits = list(self._rows(credential_id, bucket, member_id).order_by("at", "pk"))
        for hit in hits if count is None else hits[:count]:
            hit.at -= timedelta(seconds=seconds)
            hit.save(update_fields=["at"])

    def stored(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return self._rows(credential_id, bucket, member_id).count()

    def counted(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        """The admissions inside the window. The database limiter admits in one statement and
        leaves the aged rows to the cascade sweep (`ratelimit.expired_slots`), so they stay stored
        until it runs: this counts the others."""
        return (
            self._rows(credential_id, bucket, member_id)
            .exclude(pk__in=ratelimit.expired_slots(timezone.now()).values("pk"))
            .count()
        )

    def aged(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return (
            ratelimit.expired_slots(timezone.now())
            .filter(pk__in=self._rows(credential_id, bucket, member_id).values("pk"))
            .count()
        )

    def forget_member(self, member_id: int, bucket: str = "remember") -> None:
        RateLimitSlot.objects.filter(member_id=member_id, bucket=bucket).delete()


class RedisWindow:
    def __init__(self, url: str):
        self.limiter = ratelimit.RedisRateLimiter(url)
        self.limiter._client.ping()

    def _key(self, credential_id: int | None, bucket: str, member_id: int | None = None) -> str:
        return (
            self.limiter._member_key(member_id, bucket)
            if member_id is not None
            else self.limiter._key(credential_id, bucket)
        )

    def age(
        self,
        credential_id: int | None,
        seconds: float,
        count: int | None = None,
        bucket: str = "remember",
        *,
        member_id: int | None = None,
    ) -> None:
        key = self._key(credential_id, bucket, member_id)
        entries = self.limiter._client.zrange(key, 0, -1 if count is None else count - 1, withscores=True)
        self.limiter._client.zadd(key, {member: score - seconds * 1_000_000 for member, score in entries})

    def stored(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return self.limiter._client.zcard(self._key(credential_id, bucket, member_id))

    def counted(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return self.stored(credential_id, bucket, member_id=member_id)  # the script trims as it admits

    def aged(self, credential_id: int | None, bucket: str = "remember", *, member_id: int | None = None) -> int:
        return 0

    def forget_member(self, member_id: int, bucket: str = "remember") -> None:
        self.limiter._client.delete(self.limiter._member_key(member_id, bucket))


def _use_up_the_hour(agent: AgentClient) -> None:
    for i in range(120):
        assert agent.remember(namespace="n", text=f"note {i}").status_code == 201


def _age_redis_window(credential_id: int, seconds: float, count: int | None = None, bucket: str = "remember") -> None:
    """Move the oldest `count` (default all) admissions of a credential `seconds` into the past, on
    Redis' own clock (its scores are microseconds), in the member's set too (same handles)."""
    from governance.models import Credential

    limiter = get_limiter()
    key = limiter._key(credential_id, bucket)
    entries = limiter._client.zrange(key, 0, -1 if count is None else count - 1, withscores=True)
    limiter._client.zadd(key, {member: score - seconds * 1_000_000 for member, score in entries})
    member_id = Credential.objects.filter(pk=credential_id).values_list("member_id", flat=True).first()
    if member_id is not None:
        member_key = limiter._member_key(member_id, bucket)
        limiter._client.zadd(member_key, {member: score - seconds * 1_000_000 for member, score in entries}, xx=True)


def _credential_id(agent: AgentClient) -> int:
    from governance.models import Credential

    return Credential.objects.get(prefix=agent.token.split("_")[1]).pk
