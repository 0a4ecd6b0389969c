"""The remember limit and the rate-limit window can be lowered (tests, demos; the client suite's
`tight` instance waits out a 4-second window for real); the defaults stay the SPEC's."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from governance import actions
from memoryapp.ratelimit import DatabaseRateLimiter
from tests.support import error_code, make_agent


def test_the_defaults_are_the_specs():
    assert settings.AGENT_REMEMBERS_PER_HOUR == 120 and settings.RATE_LIMIT_WINDOW_SECONDS == 3600


@override_settings(AGENT_REMEMBERS_PER_HOUR=2, RATE_LIMIT_WINDOW_SECONDS=30)
def test_a_lowered_limit_and_window_answer_in_their_headers(world):
    agent = make_agent(world.editor)
    assert [agent.remember(namespace="prefs", text=f"note {i}").status_code for i in range(2)] == [201, 201]
    refused = agent.remember(namespace="prefs", text="third")
    assert refused.status_code == 429 and error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
    assert refused["RateLimit-Limit"] == "2" and 1 <= int(refused["Retry-After"]) <= 30


@override_settings(RATE_LIMIT_WINDOW_SECONDS=30)
def test_the_database_limiter_forgets_hits_older_than_the_window(world):
    credential, _ = actions.create_credential(world.editor, name="window", scopes=["memory:write"])
    credential_id = credential.pk
    limiter = DatabaseRateLimiter()
    with time_machine.travel(timezone.now(), tick=False) as clock:
        assert limiter.acquire(credential_id, 1).allowed
        refused = limiter.acquire(credential_id, 1)
        assert not refused.allowed and refused.reset_seconds == 30
        clock.shift(timedelta(seconds=31))
        assert limiter.acquire(credential_id, 1).allowed
