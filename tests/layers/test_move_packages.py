"""scripts/refactor/move_packages.py (issue 23 step 4) rewrites imports by rule, so it must get
every spelling of an import right, leave look-alike names alone and change nothing on a second
run. Generated import statements check the AST rewrite; a scratch git repository checks the
whole run (moves, the wiring's __init__, pyproject) and its idempotence; the real tree, once
moved, must have nothing left to move."""

# move_packages: names the old modules on purpose
from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("move_packages", ROOT / "scripts" / "refactor" / "move_packages.py")
mp = importlib.util.module_from_spec(_spec)
sys.modules["move_packages"] = mp
_spec.loader.exec_module(mp)

MOVED_LEAVES = sorted({old.split(".")[1] for old in mp.MODULE_MOVES if old.startswith("memoryapp.")})
STAYING = ["masking", "metrics", "models", "gates", "apps", "visibility"]


def bindings(source: str) -> dict[str, str]:
    """Name bound by each import → the module (or module.attribute) it comes from."""
    bound = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name
    return bound


def expected(module: str) -> str:
    return mp._moved(module) or module


@st.composite
def package_imports(draw):
    names = draw(st.lists(st.sampled_from(MOVED_LEAVES + STAYING), min_size=1, max_size=5, unique=True))
    aliases = [(n, draw(st.sampled_from([None, f"{n}_mod", n]))) for n in names]
    parenthesised = draw(st.booleans())
    indent = draw(st.sampled_from(["", "    ", "        "]))
    comment = draw(st.sampled_from(["", "  # why this import"]))
    spelled = [n + (f" as {a}" if a else "") for n, a in aliases]
    if parenthesised:
        body = "(\n" + "".join(f"{indent}    {s},\n" for s in spelled) + f"{indent})"
    else:
        body = ", ".join(spelled)
    statement = f"{indent}from memoryapp import {body}{comment}\n"
    if indent:
        statement = "def f():\n" + ("    def g():\n" if len(indent) > 4 else "") + statement + f"{indent}return 1\n"
    return statement, aliases


@settings(max_examples=150, deadline=None)
@given(package_imports())
def test_a_package_import_is_split_and_every_name_still_bound_to_the_same_module_moved(case):
    source, aliases = case
    rewritten, notes = mp.rewrite_python(source, "memoryapp/somewhere.py")
    assert notes == []
    before, after = bindings(source), bindings(rewritten)
    assert set(after) == set(before)  # the same names bound: no caller breaks
    for name, origin in before.items():
        assert after[name] == expected(origin), (source, rewritten)
    assert mp.rewrite_python(rewritten, "memoryapp/somewhere.py")[0] == rewritten  # idempotent
    if "#" in source:
        assert "# why this import" in rewritten


@pytest.mark.parametrize(
    ("path", "source", "result"),
    [
        ("memoryapp/foo.py", "from .errors import ApiError\n", "from core.errors import ApiError\n"),
        ("memoryapp/foo.py", "from . import errors, models\n", "from . import models\nfrom core import errors\n"),
        ("memoryapp/api/views.py", "from ..params import parse_id\n", "from core.params import parse_id\n"),
        (
            "memoryapp/foo.py",
            "from .models import MemoryVersion\n",
            "from .models import MemoryVersion\n",
        ),  # not moved: untouched
        ("memoryapp/params.py", "from .errors import validation_error\n", "from core.errors import validation_error\n"),
        # inside a moved module every relative import is spelt absolute: its dots would point into core
        ("memoryapp/cursors.py", "from .models import X\n", "from memoryapp.models import X\n"),
        (
            "retention/erasure.py",
            "from .chunks import CHUNK, run_in_chunks\n",
            "from core.chunks import CHUNK, run_in_chunks\n",
        ),
        (
            "retention/erasure.py",
            "from retention import chunks as c, models\n",
            "from retention import models\nfrom core import chunks as c\n",
        ),
        (
            "memoryapp/__init__.py",
            "from .celery import app as celery_app\n",
            "from config.celery import app as celery_app\n",
        ),
        ("tests/test_x.py", "import memoryapp.errors as e\n", "import core.errors as e\n"),
        (
            "tests/test_x.py",
            "import memoryapp\nmemoryapp.errors.ApiError\n",
            "import memoryapp\nimport core.errors\ncore.errors.ApiError\n",
        ),
        (
            "tests/test_x.py",
            "x = 1; from memoryapp import logs\n",
            "x = 1; from memoryapp import logs\n",
        ),  # shares a line: reported, not guessed
    ],
)
def test_relative_and_bare_imports(path, source, result):
    assert mp.rewrite_python(source, path)[0] == result


@pytest.mark.parametrize(
    ("text", "result"),
    [
        ('mock.patch("memoryapp.logs.emit")', 'mock.patch("core.logs.emit")'),
        ('"()": "memoryapp.logs.JsonFormatter"', '"()": "core.logs.JsonFormatter"'),
        ('DJANGO_SETTINGS_MODULE = "memoryapp.settings"', 'DJANGO_SETTINGS_MODULE = "config.settings"'),
        ("uvicorn memoryapp.asgi:application", "uvicorn config.asgi:application"),
        ("celery -A memoryapp worker", "celery -A config worker"),
        ("celery --app=memoryapp beat", "celery --app=config beat"),
        ('["-m", "celery", "-A", "memoryapp", "worker"]', '["-m", "celery", "-A", "config", "worker"]'),
        ("see `memoryapp/errors.py` and retention/chunks.py", "see `core/errors.py` and core/chunks.py"),
        ("#: memoryapp/settings.py", "#: config/settings.py"),
        # look-alikes stay
        (
            "memoryapp.envelope memoryapp.settings_extra xmemoryapp.env self.memoryapp.urls",
            "memoryapp.envelope memoryapp.settings_extra xmemoryapp.env self.memoryapp.urls",
        ),
        (
            "celery -A memoryapp.other worker; memoryapp/urls_old.py; memoryapp.apps",
            "celery -A memoryapp.other worker; memoryapp/urls_old.py; memoryapp.apps",
        ),
        ('Celery("memoryapp")', 'Celery("memoryapp")'),
    ],
)
def test_text_rules(text, result):
    assert mp.rewrite_text(text) == result
    assert mp.rewrite_text(result) == result


@given(st.text(alphabet=st.sampled_from(list("memoryapp.settings/retention.chunks-A =\"',core")), max_size=80))
def test_text_rules_are_idempotent_on_any_text(text):
    once = mp.rewrite_text(text)
    assert mp.rewrite_text(once) == once


PYPROJECT = textwrap.dedent("""\
    [tool.setuptools]
    packages = { find = { include = ["memoryapp*", "governance*", "retention*"] } }

    [tool.pytest.ini_options]
    DJANGO_SETTINGS_MODULE = "memoryapp.settings"

    [tool.mutmut]
    source_paths = ["memoryapp", "governance", "retention"]

    [tool.importlinter]
    root_packages = ["memoryapp", "governance", "retention"]

    [[tool.importlinter.contracts]]
    id = "layers"
    name = "Layers"
    type = "layers"
    # a comment line
    layers = [
        # wiring
        "memoryapp.urls : memoryapp.asgi : memoryapp.settings : memoryapp.apps : governance.apps",
        "memoryapp.api : retention.api",
        "memoryapp.errors : memoryapp.logs : memoryapp.metrics : retention.chunks",
        "governance.models : memoryapp.models",
    ]

    [[tool.importlinter.contracts]]
    id = "other"
    name = "Other"
    type = "forbidden"
    source_modules = ["governance.models"]
    forbidden_modules = ["retention"]

    # --- lint
    [tool.ruff.lint.isort]
    known-first-party = ["memoryapp", "governance", "retention", "tests", "bench"]
    """)


def test_pyproject_gains_the_packages_a_bottom_core_layer_and_the_core_contract():
    once = mp.rewrite_pyproject(mp.rewrite_text(PYPROJECT))
    assert mp.rewrite_pyproject(mp.rewrite_text(once)) == once
    config = tomllib.loads(once)
    tool = config["tool"]
    assert tool["setuptools"]["packages"]["find"]["include"] == [
        "memoryapp*",
        "governance*",
        "retention*",
        "config*",
        "core*",
    ]
    assert tool["pytest"]["ini_options"]["DJANGO_SETTINGS_MODULE"] == "config.settings"
    assert tool["mutmut"]["source_paths"][-2:] == ["config", "core"]
    assert tool["ruff"]["lint"]["isort"]["known-first-party"] == [
        "memoryapp",
        "governance",
        "retention",
        "config",
        "core",
        "tests",
        "bench",
    ]
    assert tool["importlinter"]["root_packages"] == ["memoryapp", "governance", "retention", "config", "core"]
    layers, other, core = tool["importlinter"]["contracts"]
    assert layers["layers"] == [
        "config : memoryapp.apps : governance.apps",
        "memoryapp.api : retention.api",
        "memoryapp.metrics",
        "governance.models : memoryapp.models",
        "core",
    ]
    assert other["id"] == "other" and other["forbidden_modules"] == ["retention"]
    assert core == {
        "id": "core-imports-no-app",
        "name": core["name"],
        "type": "forbidden",
        "source_modules": ["core"],
        "forbidden_modules": ["memoryapp", "governance", "retention", "config"],
    }
    # a root package added later (an app) is forbidden to core on the next run
    grown = once.replace('root_packages = ["memoryapp",', 'root_packages = ["credits", "memoryapp",')
    again = tomllib.loads(mp.rewrite_pyproject(grown))["tool"]["importlinter"]["contracts"][2]
    assert again["forbidden_modules"] == ["memoryapp", "governance", "retention", "config", "credits"]


def test_the_celery_app_moves_from_the_app_package_to_the_wiring_package():
    old = (
        'import os\n\nos.environ.setdefault("X", "1")\n\n'
        "from config.celery import app as celery_app  # noqa: E402\n\n"
        '__all__ = ["celery_app"]\n'
    )
    kept, wiring = mp.split_wiring_init(old, None)
    assert kept == 'import os\n\nos.environ.setdefault("X", "1")\n'
    assert "from config.celery import app as celery_app\n" in wiring and '__all__ = ["celery_app"]' in wiring
    assert mp.split_wiring_init(kept, wiring) == (kept, wiring)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def test_a_whole_run_on_a_scratch_repository_moves_rewrites_and_then_has_nothing_left(tmp_path):
    files = {
        "memoryapp/__init__.py": "import os\n\nfrom memoryapp.celery import app as celery_app  # noqa: "
        'E402\n\n__all__ = ["celery_app"]\n',
        "memoryapp/celery.py": 'import os\n\nos.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryapp.settings")\n',
        "memoryapp/settings.py": 'from memoryapp.env import env_str\n\nROOT_URLCONF = "memoryapp.urls"\n',
        "memoryapp/urls.py": "from memoryapp.params import IdConverter\n",
        "memoryapp/errors.py": "class ApiError(Exception):\n    pass\n",
        "memoryapp/env.py": "def env_str(name):\n    return name\n",
        "memoryapp/params.py": "from .errors import ApiError\n",
        "memoryapp/gates.py": "from memoryapp import errors, models  # both\n\n\ndef f():\n    from memoryapp.logs "
        "import line\n",
        "memoryapp/models.py": "",
        "memoryapp/logs.py": "",
        "retention/__init__.py": "",
        "retention/chunks.py": "CHUNK = 5\n",
        "retention/erasure.py": "from retention.chunks import CHUNK\n",
        "new_app/views.py": "from memoryapp.timestamps import iso  # a file the script has never seen\n",
        "memoryapp/timestamps.py": "def iso(x):\n    return x\n",
        "scripts/run.sh": "celery -A memoryapp worker & uvicorn memoryapp.asgi:application\n",
        "README.md": "Settings live in `memoryapp/settings.py`.\n",
        "pyproject.toml": PYPROJECT,
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.email=t@x.test", "-c", "user.name=t", "commit", "-qm", "seed")
    assert mp.run(tmp_path, check=True, ruff=False) == 1
    assert mp.run(tmp_path, check=False, ruff=False) == 0
    read = lambda p: (tmp_path / p).read_text()  # noqa: E731
    for gone in ["memoryapp/settings.py", "memoryapp/errors.py", "retention/chunks.py", "memoryapp/celery.py"]:
        assert not (tmp_path / gone).exists()
    assert read("config/settings.py") == 'from core.env import env_str\n\nROOT_URLCONF = "config.urls"\n'
    assert read("core/params.py") == "from core.errors import ApiError\n"
    assert read("memoryapp/gates.py").startswith("from memoryapp import models  # both\nfrom core import errors\n")
    assert "    from core.logs import line\n" in read("memoryapp/gates.py")
    assert read("new_app/views.py").startswith("from core.timestamps import iso")
    assert read("retention/erasure.py") == "from core.chunks import CHUNK\n"
    assert read("scripts/run.sh") == "celery -A config worker & uvicorn config.asgi:application\n"
    assert read("README.md") == "Settings live in `config/settings.py`.\n"
    assert "celery" not in read("memoryapp/__init__.py") and "from config.celery import app as celery_app" in read(
        "config/__init__.py"
    )
    assert read("core/__init__.py").startswith('"""The leaf helpers')
    renamed = _git(tmp_path, "diff", "--cached", "-M", "--name-status")
    assert "R100\tmemoryapp/errors.py\tcore/errors.py" in renamed  # git sees a move: history follows
    _git(tmp_path, "-c", "user.email=t@x.test", "-c", "user.name=t", "commit", "-qm", "apply")
    assert mp.run(tmp_path, check=True, ruff=False) == 0
    assert mp.run(tmp_path, check=False, ruff=False) == 0
    assert _git(tmp_path, "status", "--porcelain") == ""


def test_a_file_that_names_the_old_modules_on_purpose_is_left_alone(tmp_path):
    (tmp_path / "memoryapp").mkdir()
    (tmp_path / "memoryapp" / "errors.py").write_text("")
    kept = f"# {mp.KEEP_MARKER}\nOLD = 'memoryapp.errors'\n"
    (tmp_path / "probe.py").write_text(kept)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    assert mp.run(tmp_path, check=False, ruff=False) == 0
    assert (tmp_path / "probe.py").read_text() == kept and (tmp_path / "core" / "errors.py").exists()


def test_the_real_tree_has_nothing_left_to_move():
    if not (ROOT / "config" / "settings.py").exists():  # before the script's first run: nothing half-moved
        assert all((ROOT / mp._module_path(old)).exists() for old in mp.MODULE_MOVES)
        return
    assert mp.run(ROOT, check=True, ruff=False) == 0, (
        "run `python scripts/refactor/move_packages.py`: a file still names a moved module"
    )
