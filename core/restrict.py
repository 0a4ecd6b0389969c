"""`restrict(member, action)`: the one verb for "which of these rows may this member see".

Every QuerySet holding rows a member may see has it, in the spirit of NetBox's
`RestrictedQuerySet.restrict(user, action)`: `Collection`, `Document`, `MemoryVersion`,
`AccessEntry`, `DeletionReceipt`, `UsageRecord` and `Credential`. `Model.objects.restrict(member,
action)` is where each model's rule is written, always within the member's workspace; every read
path starts there and narrows further (a page, a filter, the member's own rows), never wider.

Actions:
- `"view"`: what the member, and the agents acting for them, may read. What an owner may read
  beyond their own rows (every receipt, every member's usage) follows from their role inside it.
- `"keep"` (memory versions only): what the member still holds of their own memories, to read it
  back to themselves — their export, the memories their access log lists, the names their
  receipts resolve, their assistant memories (an expired one within its grace, to reactivate).

An action a model does not know raises ValueError, so a typo never widens or empties a read.
Workspace configuration (members, entities, context sets) is not per-row visible: the API's
permissions decide who reads it, within the workspace (`governance.api.base`, `scoped`).
"""

from __future__ import annotations

from collections.abc import Set

VIEW = "view"
KEEP = "keep"
ACTIONS = frozenset({VIEW, KEEP})


def check_action(action: str, known: Set[str] = frozenset({VIEW})) -> str:
    """`action` if the model knows it (`known`: "view" unless the model says more); ValueError otherwise."""
    if action not in known or action not in ACTIONS:
        raise ValueError(f"restrict(): unknown action {action!r} (one of {', '.join(sorted(known))})")
    return action
