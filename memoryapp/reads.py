"""The agent reads as REST and MCP run them (SPEC §3 recall and list, §4.7 the read limit, §8.1
access log): the credential's read budget, the read, then one access entry naming the memory
versions it returned, in the same request. Both surfaces call these two functions, so neither can
hand memories to an agent without counting and recording it.

The read limit (MEMORY_READS_PER_HOUR per credential per rolling hour, recall and list together,
charged to the member too so a fresh credential brings no fresh budget: ratelimit.take_slot) is taken once the request
is admitted (gate rows 1–8, like row 11 for a remember), so a refused
request uses none; over it the answer is 429 AGENT_MEMORY_RATE_LIMITED with
``details.operation: "read"`` and the remember limit's headers. A read whose answer fails hands
its slot back. If the limiter itself is down (Redis), reads go on without it — they write nothing,
and what one costs stays bounded per process (token caps, MEMORY_QUERIES_IN_FLIGHT) — while
remembers answer 503 (docs/limits.md).

The entry is written after the answer is computed and before it is returned: if it cannot be
written the request fails (fail closed) rather than return memories nobody will see were read,
and a process killed right after answering has written it (tests/access_log/test_entry_durability.py;
why it is not deferred past the answer: `memoryapp.access_log`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from core.errors import ApiError
from memoryapp import access_log, actions, gates
from memoryapp.models import AccessOperation
from memoryapp.ratelimit import READ_BUCKET, Slot, get_limiter, rate_limited, take_slot
from memoryapp.recall.service import recall

logger = logging.getLogger(__name__)


@dataclass
class Read:
    """A read's answer and the RateLimit-* headers of the budget it used (none when the
    limiter was unavailable)."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _read_slot(ctx: gates.AgentContext) -> Slot | None:
    try:
        slot = take_slot(ctx.credential, settings.MEMORY_READS_PER_HOUR, bucket=READ_BUCKET)
    except ApiError as exc:
        if exc.code != "RATE_LIMIT_UNAVAILABLE":
            raise
        logger.warning("read limit not applied: the rate limiter is unavailable")
        return None
    if not slot.allowed:
        raise rate_limited(slot, "read", f"At most {slot.limit} reads (recall, list) per credential per hour.")
    return slot


def _read(admission: gates.Admission, operation: str, surface: str, run) -> Read:
    ctx = admission.ctx
    slot = _read_slot(ctx)
    try:
        body = run(admission)
        access_log.record(
            credential=ctx.credential,
            member=ctx.member,
            operation=operation,
            surface=surface,
            memories=body["memories"],
            hidden=body.get("hidden", 0),
        )
    except BaseException:
        if slot is not None:
            get_limiter().refund(slot)
        raise
    return Read(body, slot.headers() if slot is not None else {})


def recall_memories(admission: gates.Admission, *, surface: str) -> Read:
    return _read(admission, AccessOperation.RECALL, surface, recall)


def list_memories(admission: gates.Admission, *, surface: str) -> Read:
    return _read(admission, AccessOperation.LIST, surface, actions.memory_page)
