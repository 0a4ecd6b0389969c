"""docs/architecture.md names only what exists: every project module, attribute, model rule and path it writes
resolves in the repository, and every module of import-linter's `layers` contract appears in its picture."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

from celery import current_app
from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES = tuple(LINTER["root_packages"])

DOTTED = re.compile(rf"(?<![\w./-])(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./<>-])[a-z_.][\w.-]*/(?:[\w.<>*-]+/)*[\w.<>*-]*")
CODE = re.compile(r"`([^`\n]+)`")
MODEL_RULE = re.compile(r"^([A-Z]\w*)((?:\.\w+)+)")


def module_file(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def dotted_exists(name: str) -> bool:
    """A module of the repository, an attribute reached from the longest such module, or a Celery task's name."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        if module_file(".".join(parts[:cut])):
            break
    else:
        return False
    target = importlib.import_module(".".join(parts[:cut])) if cut < len(parts) else None
    for attribute in parts[cut:]:
        if not hasattr(target, attribute):
            return name in current_app.tasks
        target = getattr(target, attribute)
    return True


def path_exists(written: str) -> bool:
    """A file or folder; `<area>` and `*` stand for any name."""
    pattern = re.sub(r"<[^>]*>", "*", written.rstrip("."))
    return any(ROOT.glob(pattern.rstrip("/"))) if "*" in pattern else (ROOT / pattern).exists()


def model_rule_exists(written: str) -> bool:
    """`Model.attr…` for a model of the project's apps (`MemoryVersion.objects.live`); other names are not checked."""
    head, rest = MODEL_RULE.match(written).groups()
    models = {
        m.__name__: m for app in PACKAGES if apps.is_installed(app) for m in apps.get_app_config(app).get_models()
    }
    if head not in models:
        return True
    target = models[head]
    for attribute in rest.strip(".").split("."):
        if not hasattr(target, attribute):
            return False
        target = getattr(target, attribute)
    return True


def test_every_module_attribute_and_path_the_page_names_exists():
    text = DOC.read_text()
    code = CODE.findall(text)
    missing = sorted({name for name in DOTTED.findall(text) if not dotted_exists(name)})
    missing += sorted({path for span in code for path in PATH.findall(span) if not path_exists(path)})
    missing += sorted({span for span in code if MODEL_RULE.match(span) and not model_rule_exists(span)})
    assert not missing, f"docs/architecture.md names what the repository does not have: {missing}"


def test_the_picture_names_every_module_of_the_layers_contract():
    picture = re.search(r"^## Layers$.*?^```\n(.*?)^```$", DOC.read_text(), re.M | re.S).group(1)
    layers = next(c for c in LINTER["contracts"] if c["id"] == "layers")["layers"]
    modules = [m.strip() for line in layers for m in line.split(":")]
    absent = [m for m in modules if not re.search(rf"(?<![\w.]){re.escape(m)}(?!\w)", picture)]
    assert not absent, f"modules of the layers contract (pyproject.toml) missing from docs/architecture.md: {absent}"


def test_the_checks_refuse_what_does_not_exist():
    assert DOTTED.findall("`retention.erasure.erase_memories`.") == ["retention.erasure.erase_memories"]
    assert PATH.findall("`tests/<area>/support.py`") == ["tests/<area>/support.py"]
    assert not dotted_exists("memoryapp.no_such_module")
    assert not dotted_exists("memoryapp.gates.no_such_gate")
    assert not path_exists("tests/<area>/no_such_helpers.py")
    assert not model_rule_exists("MemoryVersion.objects.no_such_rule")
