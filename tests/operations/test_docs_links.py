"""The README is a front door (issue 34): it opens with the two commands, stays under 15 KB, and
every relative link in it and in docs/*.md leads to a file and heading that exist; every variable
config/settings.py reads is documented in docs/configuration.md."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(settings.BASE_DIR)
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_LIMIT_BYTES = 15_000

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text a reader follows links in: fenced blocks and inline code taken out."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        base = slug(heading)
        name, n = base, 0
        while name in found:
            n += 1
            name = f"{base}-{n}"
        found.add(name)
    return found


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page.read_text())) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_slugs_follow_githubs_rule():
    assert slug("Connect your agent") == "connect-your-agent"
    assert slug("Default embedder: chosen by the numbers") == "default-embedder-chosen-by-the-numbers"
    assert slug("stdio — `python manage.py mcp_server`") == "stdio--python-managepy-mcp_server"
    assert slug("The embedding engine's threads") == "the-embedding-engines-threads"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page: Path):
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(
                f"{target}: no file "
                f"{destination.relative_to(ROOT) if destination.is_relative_to(ROOT) else destination}"
            )
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_the_link_check_finds_a_broken_link_and_a_missing_heading(tmp_path: Path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# Title\n\n## A heading\n")
    page.write_text(
        "[ok](there.md#a-heading) [gone](missing.md) [nohead](there.md#nowhere) "
        "`[code](x.md)`\n```\n[fenced](y.md)\n```\n"
    )
    assert relative_links(page) == ["there.md#a-heading", "missing.md", "there.md#nowhere"]
    assert "a-heading" in anchors(tmp_path / "there.md") and "nowhere" not in anchors(tmp_path / "there.md")


def test_the_readme_is_a_front_door_under_15_kb():
    size = len(README.read_bytes())
    assert size <= README_LIMIT_BYTES, f"README.md is {size:,} bytes; move detail into docs/"


def test_the_readme_opens_with_the_run_and_test_commands_and_ci_runs_the_test_command():
    first_block = FENCE.search(README.read_text())
    assert first_block is not None and README.read_text().index(first_block.group(0)) < 100
    commands = [line.split("#")[0].strip() for line in first_block.group(0).splitlines()[1:-1]]
    assert commands == ["bash scripts/run.sh", "bash scripts/test.sh"]
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_every_variable_the_settings_read_is_documented_with_its_default():
    read = set(re.findall(r"env_[a-z]+\(\s*\"([A-Z][A-Z0-9_]+)\"", (ROOT / "config" / "settings.py").read_text()))
    assert len(read) > 40  # the pattern still matches how settings.py reads the environment
    table = (ROOT / "docs" / "configuration.md").read_text()
    documented = {
        name
        for row in table.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])
    }
    assert not read - documented, (
        f"read by config/settings.py, not in docs/configuration.md's tables: {sorted(read - documented)}"
    )
