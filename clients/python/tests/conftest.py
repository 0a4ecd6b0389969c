"""Fixtures: the live product (tests/live_server.py) and a world of workspaces in it.

No mocks: every test talks to the real server over HTTP (or MCP). The suite never skips: a skip
fails the session, on either backend (the server's suite has tests/skip_policy.py for the same
reason)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from governed_memory import MemoryClient  # noqa: E402
from live_server import LiveServer, World  # noqa: E402

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _skipped:
        terminalreporter.write_line(f"The client suite must not skip; skipped: {', '.join(_skipped)}", red=True)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("live"))
    server.start()
    try:
        yield server
    finally:
        errors = server.server_errors()
        server.stop()
    assert not errors, "the server answered 500 or logged a traceback:\n" + "\n".join(errors[:20])


@pytest.fixture(scope="session")
def world(live: LiveServer) -> World:
    editors = (
        "editor",
        "pager",
        "demoted",
        "quiet",
        "full",
        "limited",
        "limited2",
        "reader",
        "reads",
        "backoff",
        "backoff2",
        "graph",
        "prefixes",
        "agents",
        "pydantic",
        "fence",
        "turns",
        "examples",
        "examples-graph",
        "examples-agents",
        "examples-pydantic",
        "examples-mcp",
        "examples-agents-openai",
        "examples-pydantic-openai",
    )
    return World(
        *live.workspaces(
            ("Client suite", editors, ()),
            ("Switched off", (), ("off",)),
            ("No AI memory", (), ("--ai-memory-unavailable",)),
            ("Keeps nothing", (), ("--non-retaining",)),
        )
    )


_namespaces = itertools.count(1)


@pytest.fixture
def namespace(request: pytest.FixtureRequest) -> str:
    """A namespace no other test uses (namespaces keep the tests of one member apart)."""
    name = request.node.name[:40].strip("_").replace("_", "-").replace("[", "-").replace("]", "")
    return f"t{next(_namespaces)}-{name}"[:64]


@pytest.fixture
def editor_token(world: World) -> str:
    return world.member("editor").credential()


@pytest.fixture
def client(live: LiveServer, editor_token: str) -> Iterator[MemoryClient]:
    with MemoryClient(live.url(), editor_token) as memory:
        yield memory
