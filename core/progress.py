"""Progress on long commands (`reembed`, `run_periodic_jobs`, `verify_forgetting`): a tqdm bar on
stderr when a person watches (stdout is a terminal), and nothing at all otherwise — with
`--json`, or when stdout is a pipe or a file, the output stays exactly what a script parses.

tqdm rather than rich: it has no dependencies (it is already here through the tokenizers'
hub client) and does one thing, the bar."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from typing import IO, Any

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm


def interactive(stdout: Any, *, json: bool = False) -> bool:
    """A person is watching: stdout is a terminal and no machine-readable output was asked for."""
    isatty = getattr(stdout, "isatty", None)
    return not json and callable(isatty) and bool(isatty())


def bar(*, total: int | None, desc: str, unit: str, enabled: bool, file: IO[str] | None = None) -> tqdm:
    """A bar on stderr (so stdout keeps only results), or a silent stand-in when not `enabled`."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        disable=not enabled,
        file=file or sys.stderr,
        dynamic_ncols=True,
        leave=True,
        mininterval=0.2,
    )


def logs_above_the_bar(enabled: bool) -> AbstractContextManager:
    """While a bar is drawn, log lines (the JSON request lines of in-process checks, warnings)
    are printed above it instead of through it."""
    return logging_redirect_tqdm() if enabled else nullcontext()
