"""Helpers of the receipt tests (no tests here): forgetting that leaves receipts, the verify
command and the documented offline script run on an export, and generated names (many scripts
and their inflected forms) with the check that a page or file leaks none of them."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import CommandError
from faker import Faker
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from governance.models import Workspace
from retention.models import DeletionReceipt
from tests.support import client_for

ROOT = Path(__file__).resolve().parents[2]
FUZZ = hsettings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


def forget_some(agent, n: int, *, tag: str = "note") -> list[DeletionReceipt]:
    made = []
    for i in range(n):
        memory_id = agent.remember(namespace="n", key=f"{tag}_{i}", text=f"{tag} number {i}").json()["memory"]["id"]
        response = agent.forget(memoryId=memory_id)
        assert response.status_code == 200, response.content
        made.append(DeletionReceipt.objects.get(pk=response.json()["receiptId"]))
    return made


def run_verify(*args: str) -> tuple[int, dict]:
    out = StringIO()
    try:
        call_command("verify_receipts", "--json", *args, stdout=out)
        status = 0
    except CommandError as exc:
        status = exc.returncode
    return status, json.loads(out.getvalue())


def chain_of(report: dict, workspace: Workspace) -> dict:
    (found,) = [c for c in report["workspaces"] if c["workspaceId"] == str(workspace.pk)]
    return found


def api_report(member) -> dict:
    response = client_for(member).get(f"/api/w/{member.workspace_id}/ask-history/deletion-receipts/verify")
    assert response.status_code == 200, response.content
    return response.json()


# What a database column can hold: PostgreSQL's text and jsonb refuse NUL and lone surrogates.
STORABLE = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def documented_script() -> str:
    text = (ROOT / "docs" / "receipts.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- verify-script:start -->\n```python\n(.*?)```\n<!-- verify-script:end -->", text, re.S)
    assert block, "docs/receipts.md lost its verification script"
    # short enough to read before running it: 37 lines of code at 120 columns
    lines = [line for line in block.group(1).strip().splitlines() if line.strip()]
    assert len(lines) <= 40, f"the documented verification script is {len(lines)} lines: keep it under 40"
    return block.group(1)


def run_script(tmp_path: Path, document: dict, keys: dict) -> subprocess.CompletedProcess:
    script, export_file, key_file = tmp_path / "verify.py", tmp_path / "export.json", tmp_path / "keys.json"
    script.write_text(documented_script(), encoding="utf-8")
    export_file.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    key_file.write_text(json.dumps(keys), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-I", str(script), str(export_file), str(key_file)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


LOCALES = ("en_US", "ja_JP", "he_IL", "fr_FR", "de_DE", "pt_BR", "ru_RU", "zh_CN", "ko_KR", "el_GR", "pl_PL", "tr_TR")


def generated_names(count: int, seed: int) -> list[tuple[str, str]]:
    """(namespace, key) pairs of real words in many scripts, distinctive enough that finding one
    in a page means the page shows it (two words joined, never a word a page prints anyway)."""
    fake = Faker(list(LOCALES))
    fake.seed_instance(seed)
    names: list[tuple[str, str]] = []
    while len(names) < count:
        locale = LOCALES[len(names) % len(LOCALES)]
        namespace = f"{fake[locale].word()}_{fake[locale].word()}"[:64]
        key = f"{fake[locale].word()}-{fake[locale].word()}{len(names)}"[:120]
        if all(namespace != n and key != k for n, k in names):
            names.append((namespace, key))
    return names


def forms(word: str) -> set[str]:
    """How a page could print a word: as itself, HTML-escaped, JSON-escaped (\\u…), URL-quoted."""
    from urllib.parse import quote

    return {word, html.escape(word), json.dumps(word)[1:-1], quote(word)}


def body_of(response) -> str:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def leaks(body: str, words) -> list[str]:
    return sorted({w for w in words for form in forms(w) if form in body})


def own_receipts(member) -> list[dict]:
    response = client_for(member).get(f"/api/w/{member.workspace_id}/ask-history/deletion-receipts?limit=100")
    assert response.status_code == 200
    return response.json()["receipts"]
