"""The limiter driven directly, on both backends (the Redis one when REDIS_URL or
MUTATION_REDIS_URL names a server): `window` wraps a limiter with the means to age its stored
admissions (moving them into the past, never waiting) and to count them, per credential or per
member."""

from __future__ import annotations

import os

import pytest

from tests.limits.support import DatabaseWindow, RedisWindow, redis_url

_next_credential = iter(range(900_000_000, 901_000_000))


@pytest.fixture(params=["database", pytest.param("redis", marks=pytest.mark.redis)])
def window(request, db):
    if request.param == "database":
        return DatabaseWindow()
    url = redis_url()
    if not url:
        pytest.skip("backend: no Redis configured (REDIS_URL or MUTATION_REDIS_URL)")
    return RedisWindow(url)


@pytest.fixture
def credential_id(window):
    cid = next(_next_credential) + os.getpid() % 1000 * 1000
    _reset(window, cid)
    yield cid
    _reset(window, cid)


@pytest.fixture
def other_id(window, credential_id):
    """A second credential of the same member (the limiter only counts by its id), emptied
    before and after the test like `credential_id`."""
    oid = credential_id + 1
    _reset(window, oid)
    yield oid
    _reset(window, oid)


def _reset(window, cid: int) -> None:
    for bucket in ("remember", "turn"):
        window.limiter.reset(cid, bucket)


@pytest.fixture
def member_id(window, credential_id):
    """A member id no real member has (the limiter only counts by it): its spending is emptied
    before and after the test."""
    mid = credential_id + 500_000_000
    for bucket in ("remember", "turn"):
        window.forget_member(mid, bucket)
    yield mid
    for bucket in ("remember", "turn"):
        window.forget_member(mid, bucket)
