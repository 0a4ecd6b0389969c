"""The access history and the export in a real browser (issue 17 §1, §2), with the machinery of
`tests/pages/test_browser.py` (Debian's Chromium, pytest-django's live server). Screenshots of
each new view in both languages at 390 px and 1280 px land in tests/screenshots/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings

from governance import actions as g
from memoryapp import mcp
from tests.pages.headless import CHROMIUM, SCREENSHOTS, expect, shoot
from tests.support import AgentClient

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def agent_read(world):
    """claude-desktop remembers three things about the editor, recalls them over MCP, lists them
    over REST, and one is forgotten since."""
    _, token = g.create_credential(world.editor, name="claude-desktop", scopes=["memory:read", "memory:write"])
    agent = AgentClient(token)
    ids = [
        agent.remember(namespace="prefs", key=key, text=text).json()["memory"]["id"]
        for key, text in (
            ("drink", "Prefers green tea in the afternoon."),
            ("music", "Listens to jazz while writing reports."),
            ("travel", "Visits the Osaka office every month."),
        )
    ]
    assert not mcp.run_operation(token, "recall", {"query": "tea jazz Osaka", "limit": 3}).is_error
    assert agent.list(limit=2).status_code == 200
    assert agent.forget(memoryId=ids[1]).status_code == 200
    return world


@pytest.mark.parametrize("language", ["en", "ja"])
def test_access_history_opens_each_read_to_the_memories_it_returned(agent_read, open_session, language):
    world = agent_read
    session = open_session(language)
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    page.goto(f"/w/{world.workspace.pk}/what-bundata-remembers/")
    section = page.locator("#access-history")
    heading = "Access history" if language == "en" else "アクセス履歴"
    expect(section.get_by_role("heading", name=heading)).to_be_visible()
    recall = (
        section.locator("details").filter(has_text=re.compile("recalled 3 memories|3 件のメモリを想起しました")).first
    )
    expect(recall.locator("summary")).to_contain_text("claude-desktop")
    expect(recall.locator("summary")).to_contain_text("MCP")
    expect(recall.get_by_text("Prefers green tea in the afternoon.")).to_be_hidden()  # closed until opened
    recall.locator("summary").click()
    expect(recall.get_by_text("Prefers green tea in the afternoon.")).to_be_visible()
    expect(recall).not_to_contain_text("jazz")  # forgotten since: struck, never shown
    expect(recall).to_contain_text("erased since" if language == "en" else "その後消去")
    shoot(session, f"access_history_{language}")


@pytest.mark.parametrize("language", ["en", "ja"])
def test_the_export_button_downloads_a_document_valid_against_its_schema(agent_read, open_session, language):
    world = agent_read
    session = open_session(language)
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    button = page.get_by_role("link", name="Export my data" if language == "en" else "データをエクスポート")
    expect(button).to_be_visible()
    shoot(session, f"ai_memory_export_{language}")
    with page.expect_download() as download_info:
        button.click()
    download = download_info.value
    assert download.suggested_filename.startswith(f"memory-export-w{world.workspace.pk}-m{world.editor.pk}-")
    document = json.loads(Path(download.path()).read_text(encoding="utf-8"))
    schema = json.loads((Path(settings.BASE_DIR) / "docs" / "export.schema.json").read_text())
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(
        document
    )
    assert {m["key"] for m in document["agentMemories"]} == {"drink", "travel"}
    assert [e["surface"] for e in document["accessLog"]] == ["mcp", "rest"]
    assert len(list(SCREENSHOTS.glob(f"ai_memory_export_{language}_*.png"))) == 2
