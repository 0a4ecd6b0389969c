"""The one chunked loop (Zulip's `run_archiving_in_chunks`): every periodic job that touches many
rows does it in bounded chunks, one transaction each, until a chunk comes back short."""

from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

CHUNK = 5000


def run_in_chunks(step: Callable[[], tuple[int, int]], *, chunk: int = CHUNK) -> int:
    """Call `step` in its own transaction until it picks fewer than `chunk` rows.

    `step` picks at most `chunk` rows, handles them, and answers (rows picked, rows handled):
    the two differ when a conditional UPDATE or a concurrent worker left some alone. An
    interrupted run loses only the chunk in flight (rolled back), which the next run picks
    again. Returns the rows handled in all."""
    handled = 0
    while True:
        with transaction.atomic():
            picked, done = step()
        handled += done
        if picked < chunk:
            return handled
