"""When a call is tried again, and after how long (docs/clients.md, "Retry policy").

Only where a retry cannot do a write twice:

- 429 `AGENT_MEMORY_RATE_LIMITED` / `THROTTLED`: the server refused the request, so any
  operation (a remember too) is retried after `Retry-After` (else `RateLimit-Reset`) — when that
  fits in the caller's `max_wait`; otherwise the refusal is raised at once, with `retry_after`.
- 503 `RATE_LIMIT_UNAVAILABLE`: refused before anything was done; any operation, with jittered
  exponential back-off, never sooner than the server's `Retry-After`.
- 503 `SERVICE_UNAVAILABLE` (the server's database is busy or unreachable): reads only, with the
  same jittered back-off, never sooner than `Retry-After`; a write is raised (it may have landed).
- The connection could not be made (`ConnectionFailed`): the request never left; any operation.
- A timeout, a dropped connection, a 5xx without a refusal code: the request may have been
  applied, so only reads (recall, list) are retried; a remember, forget or turn raises
  `OutcomeUnknown` / the error, and the caller decides (list the key to see whether it landed).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from governed_memory.errors import (
    APIError,
    ConnectionFailed,
    GovernedMemoryError,
    OutcomeUnknown,
    RateLimited,
    RateLimitUnavailable,
    ServiceUnavailable,
    Throttled,
    UnexpectedResponse,
)

#: operations that change nothing, so a retry after an unknown outcome is harmless
READ_OPERATIONS = frozenset({"recall", "list"})


@dataclass(frozen=True)
class RetryPolicy:
    #: attempts in all, the first included (1: never retry)
    max_attempts: int = 4
    #: seconds one call may spend waiting between attempts, all waits added; a 429 asking for
    #: more than what is left is raised at once instead of waited for
    max_wait: float = 30.0
    #: back-off of the n-th retry: min(backoff_cap, backoff_base * 2 ** (n - 1)), jittered
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    async_sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    random: Callable[[], float] = field(default=random.random, compare=False)

    def _backoff(self, attempt: int) -> float:
        return min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1))

    def delay(self, operation: str, error: GovernedMemoryError, attempt: int, waited: float) -> float | None:
        """Seconds to wait before attempt `attempt + 1`, or None to raise `error` now."""
        if attempt >= self.max_attempts:
            return None
        if isinstance(error, (RateLimited, Throttled)):
            wait = error.retry_after
            wait = self._backoff(attempt) if wait is None else wait
        elif isinstance(error, RateLimitUnavailable) or (
            isinstance(error, ServiceUnavailable) and operation in READ_OPERATIONS
        ):
            # Never sooner than the server asked; the jitter spreads clients that failed together.
            floor = error.retry_after or 0.0
            wait = max(floor, self._backoff(attempt)) * (1.0 + 0.5 * self.random())
        elif isinstance(error, ConnectionFailed):
            wait = self._backoff(attempt) * self.random()
        elif operation in READ_OPERATIONS and _maybe_transient(error):
            wait = self._backoff(attempt) * self.random()
        else:
            return None
        if waited + wait > self.max_wait:
            return None
        return wait


def _maybe_transient(error: GovernedMemoryError) -> bool:
    if isinstance(error, OutcomeUnknown):
        return True
    if isinstance(error, APIError):
        return error.status in (500, 502, 503, 504)
    if isinstance(error, UnexpectedResponse):
        return error.status in (502, 503, 504)
    return False


DEFAULT_RETRY = RetryPolicy()
NO_RETRY = RetryPolicy(max_attempts=1)
