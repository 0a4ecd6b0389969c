"""Every program in clients/python/examples/ runs against the live product as a newcomer runs it —
`python clients/python/examples/<file>` from the repository, GAM_URL and GAM_TOKEN in the
environment, no provider key — and what it printed is checked against what the API then holds:
the memory it remembered (masked) and, for the ones that recall, that very memory (its id, which
only the server's answer can carry) in the recall it printed. The two agent examples run a second
time with OPENAI_API_KEY set, their real-provider path, against a local stand-in for OpenAI's
Responses API (tests/fake_openai.py). Each runs with only what its extra installs: this suite's
virtualenv holds every extra, so the others' packages are hidden from the example's process (an
extra that lacks what its example imports fails here, as it fails a newcomer). docs/clients.md
shows each example verbatim."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from governed_memory import MemoryClient
from governed_memory.models import Memory
from live_server import REPO, LiveServer, World

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))  # tests/fake_openai.py plays the examples' own script
HELPERS = {"scripted_models.py"}  # imported by the agent examples; not a program of its own
PROGRAMS = sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in HELPERS)
# Each example runs as a member of its own: they all write the namespace "travel".
MEMBERS = {
    "client_remember_recall.py": "examples",
    "langgraph_remember_recall.py": "examples-graph",
    "openai_agents_tools.py": "examples-agents",
    "pydantic_ai_tools.py": "examples-pydantic",
    "mcp_sdk_client.py": "examples-mcp",
}
EXTRAS = {
    "client_remember_recall.py": "",
    "langgraph_remember_recall.py": "langgraph",
    "openai_agents_tools.py": "openai-agents",
    "pydantic_ai_tools.py": "pydantic-ai",
}
# What an example installs when it is not the client with an extra: the MCP example is the official
# MCP SDK alone, as the README's comment says (it needs no package of ours).
REQUIREMENTS = {"mcp_sdk_client.py": "mcp>=2.3,<3"}
AGENTS = ("openai_agents_tools.py", "pydantic_ai_tools.py")
SEAT = "Prefers an aisle seat; tickets to [EMAIL]"


def test_every_example_is_run_by_this_suite():
    assert sorted(MEMBERS) == PROGRAMS, (
        "a new example needs a member in MEMBERS (and conftest's world) and its checks here"
    )


def test_each_extra_hides_the_other_frameworks():
    """The isolation the example runs rely on is real: each extra sees its framework and not the others'."""
    frameworks = {"langgraph": "langgraph", "openai-agents": "agents", "pydantic-ai": "pydantic_ai"}
    for extra, module in frameworks.items():
        hidden = hidden_modules(f"governed-memory[{extra}]")
        assert module not in hidden and {m for m in frameworks.values() if m != module} <= hidden and "pytest" in hidden
    assert {"httpx", "governed_memory"}.isdisjoint(hidden_modules("governed-memory")) and "pydantic" in hidden_modules(
        "governed-memory"
    )
    assert "openai" not in hidden_modules(
        "governed-memory[pydantic-ai]"
    )  # pydantic-ai's OpenAI provider, which the example names


def test_the_slim_package_alone_could_not_run_the_pydantic_ai_example_with_a_key(tmp_path: Path):
    """Why the extra is `pydantic-ai-slim[openai]`: without its OpenAI provider, naming an "openai:"
    model is an ImportError — what the example did with a key before (issue 34)."""
    code = "from pydantic_ai import Agent; Agent('openai:gpt-5')"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OPENAI_API_KEY": "sk-unused"}
    without = subprocess.run(
        [sys.executable, "-c", code],
        env=env | only_installed_by("pydantic-ai-slim==2.68.0", tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert without.returncode == 1 and "ImportError" in without.stderr and "pydantic-ai-slim[openai]" in without.stderr
    with_extra = subprocess.run(
        [sys.executable, "-c", code],
        env=env | only_installed_by("governed-memory[pydantic-ai]", tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert with_extra.returncode == 0, with_extra.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_the_docs_show_each_example_verbatim(name: str):
    code = (EXAMPLES / name).read_text()
    assert f"```python\n{code}```" in (REPO / "docs" / "clients.md").read_text()


def installed_by(requirement: str) -> set[str]:
    """The distributions `pip install <requirement>` brings: its requirements, with the extras they
    name, followed through their own (as installed here: the suite's virtualenv holds all of them)."""
    names: set[str] = set()
    seen: set[tuple[str, str]] = set()
    todo = [Requirement(requirement)]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        for extra in {"", *req.extras}:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            try:
                requires = metadata.requires(name) or []
            except metadata.PackageNotFoundError:
                continue  # a requirement for another platform or Python
            names.add(name)
            todo += [r for r in map(Requirement, requires) if r.marker is None or r.marker.evaluate({"extra": extra})]
    return names


def hidden_modules(requirement: str) -> set[str]:
    """Top-level modules of this virtualenv that `pip install <requirement>` would not have installed."""
    allowed = installed_by(requirement)
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in allowed for d in dists)
    }


def only_installed_by(requirement: str, tmp_path: Path) -> dict[str, str]:
    """The environment of a process that sees only what `pip install <requirement>` installs: a
    sitecustomize answers "No module named …" for every other distribution's modules."""
    site = tmp_path / f"site-{abs(hash(requirement))}"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        f"HIDDEN = frozenset({sorted(hidden_modules(requirement))!r})\n\n\n"
        "class NotInstalled:\n"
        "    @staticmethod\n"
        "    def find_spec(name, path=None, target=None):\n"
        "        if name.partition('.')[0] in HIDDEN:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n\n\n"
        "sys.meta_path.insert(0, NotInstalled)\n"
    )
    return {"PYTHONPATH": str(site)}


def run_example(name: str, live: LiveServer, token: str, tmp_path: Path, **extra: str) -> str:
    # What a newcomer's shell has: the two variables the README exports, no provider key unless given
    # here, and only what the example's extra installs.
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith(("GAM_", "OPENAI_", "PYTHONPATH"))}
        | {"GAM_URL": live.url(), "GAM_TOKEN": token}
        | extra
    )
    requirement = REQUIREMENTS.get(name) or (f"governed-memory[{EXTRAS[name]}]" if EXTRAS[name] else "governed-memory")
    env |= only_installed_by(requirement, tmp_path)
    completed = subprocess.run(
        [sys.executable, f"clients/python/examples/{name}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr and "Warning" not in completed.stderr, completed.stderr[-3000:]
    return completed.stdout


def remembered(live: LiveServer, token: str, versions: int = 1) -> Memory:
    """What the API holds afterwards: one memory, key "seat", masked, at the given version."""
    with MemoryClient(live.url(), token) as memory:
        notes = list(memory.list(namespace="travel"))
    assert [(n.key, n.text, n.masked, n.version) for n in notes] == [("seat", SEAT, ["EMAIL"], versions)]
    return notes[0]


def recalled_in(out: str, note: Memory) -> bool:
    return (
        f'<memory id="{note.id}" namespace="travel" key="seat" ' in out
        and f'trust="untrusted" evidence="false">{SEAT}</memory>' in out
    )


def test_the_client_example_remembers_recalls_lists_and_is_refused(live: LiveServer, world: World, tmp_path: Path):
    token = world.member(MEMBERS["client_remember_recall.py"]).credential()
    out = run_example("client_remember_recall.py", live, token, tmp_path)
    note = remembered(live, token)
    assert recalled_in(out, note) and "Recalled 1 memories" in out
    assert f"1 {SEAT} ['EMAIL']" in out
    assert "AGENT_MEMORY_PERSONAL_DATA {'fields': {'key': ['EMAIL']}}" in out


def test_the_langgraph_example_remembers_in_one_run_and_recalls_in_the_next(
    live: LiveServer, world: World, tmp_path: Path
):
    token = world.member(MEMBERS["langgraph_remember_recall.py"]).credential()
    assert run_example("langgraph_remember_recall.py", live, token, tmp_path).strip() == f"['{SEAT}']"
    remembered(live, token, versions=1)
    assert (
        run_example("langgraph_remember_recall.py", live, token, tmp_path).strip() == f"['{SEAT}']"
    )  # again: a new version, same answer
    remembered(live, token, versions=2)


def test_the_mcp_sdk_example_remembers_and_recalls_over_streamable_http(live: LiveServer, world: World, tmp_path: Path):
    """The official MCP SDK alone (no package of ours), the bearer token on its HTTP client."""
    token = world.member(MEMBERS["mcp_sdk_client.py"]).credential()
    out = run_example("mcp_sdk_client.py", live, token, tmp_path)
    note = remembered(live, token)
    assert recalled_in(out, note) and "Recalled 1 memories" in out
    assert "governed_memory" in hidden_modules(REQUIREMENTS["mcp_sdk_client.py"])  # it ran without our client


@pytest.mark.parametrize("name", AGENTS)
def test_an_agent_example_runs_offline_with_its_scripted_model(
    name: str, live: LiveServer, world: World, tmp_path: Path
):
    token = world.member(MEMBERS[name]).credential()
    out = run_example(name, live, token, tmp_path)
    note = remembered(live, token)
    assert out.startswith("From my memory tools:\n") and recalled_in(out, note)


@pytest.mark.parametrize("name", AGENTS)
def test_an_agent_example_uses_openai_when_the_key_is_set(name: str, live: LiveServer, world: World, tmp_path: Path):
    from fake_openai import FakeOpenAI

    token = world.member(
        f"{MEMBERS[name]}-openai"
    ).credential()  # a member of its own: the offline run's memory is not there
    with FakeOpenAI("sk-example-test") as openai:
        out = run_example(
            name,
            live,
            token,
            tmp_path,
            OPENAI_API_KEY=openai.api_key,
            OPENAI_BASE_URL=openai.base_url,
            OPENAI_AGENTS_DISABLE_TRACING="1",
        )
    note = remembered(live, token)
    assert out.startswith("From my memory tools:\n") and recalled_in(out, note)
    # The framework's own OpenAI client sent three turns with the key, each offering the four tools; the
    # tools' outputs went back to the model: the stored memory after the remember, the recall after it.
    assert [r["path"] for r in openai.requests] == ["/v1/responses"] * 3
    assert all(r["authorization"] == "Bearer sk-example-test" for r in openai.requests)
    for request in openai.requests:
        assert {"remember_memory", "recall_memories", "list_memories", "forget_memory"} <= {
            tool.get("name") for tool in request["body"]["tools"]
        }
    last = [
        item
        for item in openai.requests[-1]["body"]["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    assert len(last) == 2 and recalled_in(str(last[1]["output"]), note)
