"""CI cannot go green by skipping (pytest plugin, loaded by tests/conftest.py).

A skip whose reason starts with `backend:` is expected: the test needs the other database (a
PostgreSQL row lock on the SQLite suite, a SQLite file on the PostgreSQL one). Every other skip
means something that must run did not (Chromium missing, Redis down, a package absent). At the
end of the session the skips are printed grouped by reason, for this backend; with
`REQUIRE_SERVICES=1` (CI) any unexpected skip fails the run.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

EXPECTED_PREFIX = "backend:"
_skips: list[tuple[str, str]] = []


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        reason = str(longrepr[2])
    else:
        reason = str(longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skips.append((report.nodeid, skip_reason(report)))


def backend_name() -> str:
    from django.conf import settings

    database = "PostgreSQL" if settings.IS_POSTGRES else "SQLite"
    return f"{database} + {'Redis' if settings.REDIS_URL else 'no Redis'}"


def _unexpected() -> list[tuple[str, str]]:
    return [(node, reason) for node, reason in _skips if not reason.startswith(EXPECTED_PREFIX)]


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    unexpected = _unexpected()
    terminalreporter.write_sep("-", f"skips on {backend_name()}: {len(_skips)} ({len(unexpected)} unexpected)")
    for reason, count in sorted(Counter(reason for _, reason in _skips).items()):
        terminalreporter.write_line(f"  {count:>4}  {reason}")
    if unexpected and os.environ.get("REQUIRE_SERVICES") == "1":
        terminalreporter.write_line("Tests that must run in CI were skipped (this fails the run):", red=True)
        for node, reason in unexpected:
            terminalreporter.write_line(f"  {node}: {reason}", red=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _unexpected() and os.environ.get("REQUIRE_SERVICES") == "1" and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
