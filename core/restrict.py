"""`restrict(member, action)`: the one verb for "which of these rows may this member see".

Every QuerySet holding rows a member may see has it, in the spirit of NetBox's
`RestrictedQuerySet.restrict(user, action)`: `Collection`, `Document`, `MemoryVersion`,
`AccessEntry`, `DeletionReceipt` and `UsageRecord`. `Model.objects.restrict(member, "view")` is
where each model's rule is written, always within the member's workspace; every read path starts
there and narrows further (a page, a filter), never wider.

Actions: `"view"`, what the member, and the agents acting for them, may read. It is the only one
the code needs: what an owner may read beyond their own rows (every receipt, every member's usage)
follows from their role inside "view". An unknown action raises ValueError, so a typo never
widens or empties a read silently.
"""

from __future__ import annotations

VIEW = "view"
ACTIONS = frozenset({VIEW})


def check_action(action: str) -> str:
    """`action` if the vocabulary has it; ValueError otherwise."""
    if action not in ACTIONS:
        raise ValueError(f"restrict(): unknown action {action!r} (one of {', '.join(sorted(ACTIONS))})")
    return action
