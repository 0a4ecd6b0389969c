"""The member bound of every budget (issue 22, F1; docs/limits.md), driven on the limiter itself
with small limits, on both backends: each admission is charged to the credential and to its
member; the tighter of the two decides, and its `remaining` and reset are what the slot reports,
while `limit` stays the credential's own (the RateLimit-Limit of SPEC §4.7). The member's
admissions age out of the window, are refunded and reset like the credential's."""

from __future__ import annotations

import os

import pytest
from django.utils import timezone

from core import backends
from governance import actions
from memoryapp import ratelimit
from memoryapp.models import RateLimitSlot
from memoryapp.ratelimit import MemberBound, member_bound
from tests.limits.support import RedisWindow, redis_url

pytestmark = pytest.mark.django_db


def _credential(member, scopes=("memory:read", "memory:write")):
    credential, _ = actions.create_credential(member, name="limit test", scopes=list(scopes))
    return credential


def test_the_member_bound_refuses_when_it_is_the_tighter_and_reports_its_remaining(window, credential_id, member_id):
    bound = MemberBound(member_id, 2)
    slots = [window.limiter.acquire(credential_id, 5, member=bound) for _ in range(3)]
    assert [s.allowed for s in slots] == [True, True, False]
    assert [s.remaining for s in slots] == [1, 0, 0]
    assert {s.limit for s in slots} == {5}  # the header's limit is the credential's budget
    assert {s.member_id for s in slots} == {member_id} and {s.credential_id for s in slots} == {credential_id}
    assert window.stored(credential_id) == 2 and window.stored(None, member_id=member_id) == 2


def test_the_credential_decides_when_it_is_the_tighter(window, credential_id, member_id):
    bound = MemberBound(member_id, 10)
    slots = [window.limiter.acquire(credential_id, 2, member=bound) for _ in range(3)]
    assert [s.allowed for s in slots] == [True, True, False]
    assert [s.remaining for s in slots] == [1, 0, 0]


def test_a_members_credentials_share_the_bound(window, credential_id, other_id, member_id):
    bound = MemberBound(member_id, 3)
    assert window.limiter.acquire(credential_id, 2, member=bound).allowed
    assert window.limiter.acquire(credential_id, 2, member=bound).allowed
    last = window.limiter.acquire(other_id, 2, member=bound)
    assert last.allowed and last.remaining == 0  # the member's 3rd: nothing left for it, though `other` spent 1 of 2
    refused = window.limiter.acquire(other_id, 2, member=bound)
    assert not refused.allowed and refused.remaining == 0
    assert window.limiter.acquire(other_id, 2).allowed  # without the bound, `other` had one left


def test_the_reset_of_a_member_refusal_is_when_the_members_oldest_admission_leaves(
    window, credential_id, other_id, member_id
):
    bound = MemberBound(member_id, 2)
    window.limiter.acquire(credential_id, 5, member=bound)
    window.limiter.acquire(credential_id, 5, member=bound)
    window.age(None, 1000, member_id=member_id)
    if isinstance(window, RedisWindow):
        window.age(credential_id, 1000)
    refused = window.limiter.acquire(other_id, 5, member=bound)
    assert not refused.allowed
    # `other` has spent nothing (its own reset would be 0 or a full hour): the member's oldest binds
    assert 2599 <= refused.reset_seconds <= 2600
    assert refused.headers()["Retry-After"] == str(refused.reset_seconds)


def test_the_members_admissions_leave_the_window_after_an_hour(window, credential_id, other_id, member_id):
    bound = MemberBound(member_id, 2)
    window.limiter.acquire(credential_id, 5, member=bound)
    window.limiter.acquire(credential_id, 5, member=bound)
    window.age(None, 3599, member_id=member_id)
    assert not window.limiter.acquire(other_id, 5, member=bound).allowed  # still inside the hour
    window.age(None, 2, member_id=member_id)
    admitted = window.limiter.acquire(
        other_id, 5, member=bound
    )  # through another credential: the member's window trims
    assert admitted.allowed and admitted.remaining == 1
    # trimmed (Redis) or left, counting for nothing, to the cascade sweep (the database limiter admits in one statement)
    assert window.counted(None, member_id=member_id) == 1 and window.aged(None, member_id=member_id) in (0, 2)


def test_a_refund_hands_the_slot_back_to_the_member_too(window, credential_id, other_id, member_id):
    bound = MemberBound(member_id, 1)
    slot = window.limiter.acquire(credential_id, 5, member=bound)
    assert not window.limiter.acquire(other_id, 5, member=bound).allowed
    window.limiter.refund(slot)
    assert window.stored(credential_id) == 0 and window.stored(None, member_id=member_id) == 0
    assert window.limiter.acquire(other_id, 5, member=bound).allowed


def test_an_admission_without_a_bound_charges_no_member(window, credential_id, member_id):
    slot = window.limiter.acquire(credential_id, 2)
    assert slot.allowed and slot.member_id == 0
    assert window.stored(None, member_id=member_id) == 0
    window.limiter.refund(slot)
    assert window.stored(credential_id) == 0


@pytest.mark.redis
def test_member_keys_expire_with_the_window_on_redis(db):
    url = redis_url()
    if not url:
        pytest.skip("backend: no Redis configured (REDIS_URL or MUTATION_REDIS_URL)")
    window, credential_id = RedisWindow(url), 902_000_000 + os.getpid() % 1000
    member_id = credential_id + 500_000_000
    window.limiter.acquire(credential_id, 5, member=MemberBound(member_id, 5))
    client = window.limiter._client
    keys = (window.limiter._key(credential_id), window.limiter._member_key(member_id))
    try:
        for key in keys:
            assert 3_600_000 < client.pttl(key) <= 3_601_000  # the window plus one second (the table is swept instead)
    finally:
        client.delete(*keys)


def test_the_bound_is_the_budget_times_the_members_usable_credentials(world):
    member = world.editor
    first = _credential(member)
    assert member_bound(first, 7) == MemberBound(member.pk, 7)
    second = _credential(member)
    assert member_bound(second, 7).limit == 14
    actions.revoke_credential(second, actor=member.user)
    actions.revoke_credential(first, actor=member.user)
    assert member_bound(first, 7).limit == 7  # none usable: never a bound of 0
    _credential(world.viewer, scopes=["memory:read"])  # another member's credentials do not count
    assert member_bound(first, 7).limit == 7


def test_take_slot_charges_the_credentials_member(world, settings):
    settings.RATE_LIMIT_BACKEND = "database"
    backends.forget("RATE_LIMIT_BACKEND")
    try:
        credential = _credential(world.editor)
        assert ratelimit.take_slot(credential, 3).bucket == "remember"  # the default budget
        slot = ratelimit.take_slot(credential, 3, bucket="turn")
        assert slot.allowed and slot.member_id == world.editor.pk and slot.bucket == "turn"
        row = RateLimitSlot.objects.get(pk=int(slot.handle))
        assert (row.credential_id, row.member_id, row.bucket) == (credential.pk, world.editor.pk, "turn")
        assert row.at <= timezone.now()
    finally:
        backends.forget("RATE_LIMIT_BACKEND")


def test_reset_forgets_the_members_spending_too(window, world):
    credential, member = _credential(world.editor), world.editor
    bound = MemberBound(member.pk, 1)
    window.limiter.reset(credential.pk)
    assert window.limiter.acquire(credential.pk, 1, member=bound).allowed
    window.limiter.reset(credential.pk)
    assert window.stored(None, member_id=member.pk) == 0
    assert window.limiter.acquire(credential.pk + 1, 1, member=bound).allowed
    window.limiter.reset(credential.pk + 1)
    window.limiter.reset(credential.pk)


def test_a_tie_reports_the_credentials_reset_the_later_of_the_two(window, credential_id, other_id, member_id):
    """When the credential and the member have as much left, the next admission waits for both:
    the reset is the credential's (the member's oldest admission is never newer than it)."""
    bound = MemberBound(member_id, 3)
    window.limiter.acquire(other_id, 5, member=bound)
    window.age(None, 1000, member_id=member_id)
    if isinstance(window, RedisWindow):
        window.age(other_id, 1000)
    window.limiter.acquire(credential_id, 2, member=bound)
    tie = window.limiter.acquire(credential_id, 2, member=bound)  # 1 left on each before it
    assert tie.allowed and tie.remaining == 0
    assert 3599 <= tie.reset_seconds <= 3600  # not the member's 2600


def test_the_members_budgets_count_apart(window, credential_id, other_id, member_id):
    bound = MemberBound(member_id, 1)
    turn = window.limiter.acquire(credential_id, 5, "turn", member=bound)
    assert turn.allowed
    assert window.stored(None, "turn", member_id=member_id) == 1 and window.stored(None, member_id=member_id) == 0
    assert window.limiter.acquire(other_id, 5, member=bound).allowed  # a turn never uses up the member's remembers
    assert not window.limiter.acquire(other_id, 5, "turn", member=bound).allowed
    window.limiter.refund(turn)  # handed back to the member's turn budget
    assert window.stored(None, "turn", member_id=member_id) == 0
    assert window.limiter.acquire(other_id, 5, "turn", member=bound).allowed


def test_a_refused_slot_holds_no_handle(window, credential_id, member_id):
    bound = MemberBound(member_id, 1)
    assert window.limiter.acquire(credential_id, 5, member=bound).handle
    refused = window.limiter.acquire(credential_id, 5, member=bound)
    assert not refused.allowed and window.stored(credential_id) == 1
    if not isinstance(window, RedisWindow):
        assert refused.handle == ""  # no row: nothing a refund could name (Redis never stores a refused handle)


def test_reset_of_the_turn_budget_forgets_the_members_turns(window, world):
    credential, member = _credential(world.editor), world.editor
    bound = MemberBound(member.pk, 1)
    window.limiter.reset(credential.pk, "turn")  # ids repeat across tests; Redis keeps what an earlier test left
    assert window.limiter.acquire(credential.pk, 1, "turn", member=bound).allowed
    window.limiter.reset(credential.pk, "turn")
    assert window.stored(None, "turn", member_id=member.pk) == 0
    window.limiter.reset(credential.pk, "turn")


def test_the_redis_limiter_never_waits_long_on_redis():
    """A Redis that stops answering costs a request at most 2 s before the 503 (docs/limits.md)."""
    limiter = ratelimit.RedisRateLimiter("redis://127.0.0.1:1/0")  # no connection is made to read its settings
    kwargs = limiter._client.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (2, 2)
