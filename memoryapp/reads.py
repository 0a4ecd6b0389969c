"""The agent reads as REST and MCP run them (SPEC §3 recall and list, §8.1 access log): the read,
then one access entry naming the memory versions it returned, in the same request. Both surfaces
call these two functions, so neither can hand memories to an agent without recording it.

The entry is written after the answer is computed and before it is returned: if it cannot be
written the request fails (fail closed) rather than return memories nobody will see were read.
"""

from __future__ import annotations

from typing import Any

from memoryapp import access_log, actions, gates
from memoryapp.models import AccessOperation
from memoryapp.recall.service import recall


def _logged(admission: gates.Admission, operation: str, surface: str, body: dict[str, Any]) -> dict[str, Any]:
    ctx = admission.ctx
    access_log.record(credential=ctx.credential, member=ctx.member, operation=operation, surface=surface, memories=body["memories"], hidden=body.get("hidden", 0))
    return body


def recall_memories(admission: gates.Admission, *, surface: str) -> dict[str, Any]:
    return _logged(admission, AccessOperation.RECALL, surface, recall(admission))


def list_memories(admission: gates.Admission, *, surface: str) -> dict[str, Any]:
    return _logged(admission, AccessOperation.LIST, surface, actions.list_memories(admission))
