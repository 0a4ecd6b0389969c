"""The member's pages of issue 34 §6 in a real browser (Debian's Chromium through Playwright,
pytest-django's live server, the machinery of tests/pages/test_browser.py), in English and
Japanese at 390 px and 1280 px: the topic moved from the edit page, the usage note, one date
format with its zone, agent-memory cards at most 160 px tall at 390 px with their details behind
a disclosure that opens from the keyboard, and a new credential's connection snippet. No page
scrolls sideways. Screenshots land in tests/screenshots/seed002/ (committed, like the others)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from memoryapp import assistant
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, Source
from tests.pages.headless import CHROMIUM, SCREENSHOTS, expect
from tests.pages.support import MOMENT
from tests.support import make_agent

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]

SHOTS = SCREENSHOTS / "seed002"
WIDTHS = (390, 1280)
MAX_CARD_HEIGHT = 160
LONG_KEY = "quarterly_business_review_preparation_notes_for_the_enterprise_plus_renewal_with_procurement_and_legal"[
    :120
]
LONG_TEXT = (
    "The customer asked that every quarterly review starts with the renewal timeline, then the open security "
    "questionnaire items, then the integration roadmap. " * 4
)


@pytest.fixture
def seeded(world):
    agent = make_agent(world.editor)
    bodies = [
        {"namespace": "crm", "key": "account_tier", "text": "Nagano Foods is on the Enterprise tier."},
        {"namespace": "crm", "key": "account_tier", "text": "Nagano Foods moved to Enterprise Plus."},
        {
            "namespace": "customer-relationship-management-apac-enterprise-accounts",
            "key": LONG_KEY,
            "text": LONG_TEXT[:1000],
        },
        {
            "namespace": "長野フーズ_営業メモ",
            "key": "次回の打ち合わせ",
            "text": (
                "長野フーズ様の四半期レビューでは、まず契約更新のスケジュールを確認し、"
                "次にセキュリティ質問票の未回答項目を説明してください。"
            )
            * 3,
        },
        {"namespace": "projects", "text": "Owns the Q3 launch checklist."},
    ] + [
        {
            "namespace": "notes",
            "key": f"note_{i}",
            "text": f"Note {i}: prefers the weekly summary on Mondays before the stand-up.",
        }
        for i in range(6)
    ]
    for body in bodies:
        assert agent.remember(**body).status_code == 201
    assistant.add_assistant_memory(
        world.editor,
        kind="instruction",
        topic="demo_product_code",
        summary="デモ製品のコードネームは Aurora です。",
        details=["製品紹介ではこのコードネームを使う"],
        source=Source.USER_REQUEST,
    )
    assistant.add_assistant_memory(
        world.editor,
        kind="fact",
        topic="deadline",
        summary="The Q3 launch deadline is Friday",
        details=[],
        source=Source.AI_EXTRACTED,
    )
    expired, _ = assistant.add_assistant_memory(
        world.editor,
        kind="fact",
        topic="location",
        summary="The office used to be in Shinagawa.",
        details=[],
        source=Source.AI_EXTRACTED,
    )
    days = world.workspace.ask_history.agent_memory_retention_days
    MemoryVersion.objects.filter(pk=expired.pk).update(retention_anchor=timezone.now() - timedelta(days=days + 1))
    return world


def fits(page) -> dict:
    return page.evaluate(
        """() => ({
            scrollWidth: document.documentElement.scrollWidth,
            innerWidth: window.innerWidth,
            cards: [...document.querySelectorAll('.agent-card')].map(c => Math.round(c.getBoundingClientRect().height)),
            times: [...document.querySelectorAll('main time')].map(t => t.textContent.trim()),
        })"""
    )


def look(session, name: str, language: str) -> list[dict]:
    """At each width: no sideways scroll, every date in the one format, a screenshot."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    found = []
    for width in WIDTHS:
        session.page.set_viewport_size({"width": width, "height": 860})
        measured = fits(session.page)
        assert measured["scrollWidth"] <= measured["innerWidth"], (name, language, width, measured)
        for written in measured["times"]:
            assert MOMENT[language].fullmatch(written), (name, language, written)
        session.page.evaluate("window.scrollTo(0, 0)")
        session.page.screenshot(path=str(SHOTS / f"{name}_{language}_{width}.png"), full_page=True)
        found.append(measured | {"width": width})
    return found


@pytest.mark.parametrize("language", ["en", "ja"])
def test_the_member_pages_of_seed_002(seeded, open_session, language):
    world = seeded
    ws = world.workspace.pk
    ja = language == "ja"
    session = open_session(language)
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page

    # AI memory: the usage note, the expired memory, dates with their zone
    page.goto(f"/w/{ws}/ai-memory/")
    note = page.locator("#usage-and-credits")
    expect(note.get_by_role("heading", name="使用量と料金" if ja else "Usage and credits")).to_be_visible()
    expect(note).to_contain_text("AI メモリ（入力）" if ja else "AI memory (input)")
    expect(page.locator("main")).to_contain_text("期限切れのメモリ" if ja else "Expired memories")
    measured = look(session, "ai_memory", language)
    assert all(m["times"] for m in measured)

    # the topic is editable: a new topic moves the memory and closes the old one
    memory = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE, key="demo_product_code")
    page.goto(f"/w/{ws}/ai-memory/{memory.pk}/edit/")
    topic = page.get_by_label("トピック" if ja else "Topic")
    expect(topic).to_have_value("demo_product_code")
    expect(page.locator("#id_topic_helptext")).to_contain_text(
        "元のトピックは終了" if ja else "the old topic is closed"
    )
    topic.fill("product_codename")
    look(session, "ai_memory_edit_topic", language)
    page.get_by_role("button", name="保存" if ja else "Save").click()
    expect(page.locator(".messages")).to_contain_text("元のトピックは終了しました" if ja else "the old topic is closed")
    expect(page.locator("article.memory", has_text="product_codename")).to_contain_text("Aurora")
    expect(page.locator("article.memory", has_text="demo_product_code")).to_have_count(0)
    look(session, "ai_memory_moved", language)
    assert MemoryVersion.objects.get(pk=memory.pk).valid_to is not None

    # agent memories: compact cards, details behind a disclosure that opens from the keyboard
    page.goto(f"/w/{ws}/what-bundata-remembers/")
    cards = page.locator(".agent-card")
    expect(cards).to_have_count(10)
    measured = look(session, "agent_memories", language)
    narrow = next(m for m in measured if m["width"] == 390)
    assert len(narrow["cards"]) == 10 and max(narrow["cards"]) <= MAX_CARD_HEIGHT, narrow["cards"]
    long_card = cards.filter(has_text=LONG_KEY)
    meta = long_card.locator(".agent-meta")
    expect(meta).to_be_hidden()
    long_card.locator("summary").focus()
    page.keyboard.press("Enter")
    expect(meta).to_be_visible()
    expect(meta).to_contain_text("コレクション" if ja else "Collection")
    page.set_viewport_size({"width": 390, "height": 860})
    wide = page.evaluate(
        """() => [...document.querySelectorAll('body *')]
            .filter(el => el.getBoundingClientRect().right > window.innerWidth + 1)
            .slice(0, 8)
            .map(el => el.tagName + '.' + el.className + ':' + Math.round(el.getBoundingClientRect().right))"""
    )
    assert fits(page)["scrollWidth"] <= 390, wide
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOTS / f"agent_memories_open_{language}_390.png"), full_page=True)

    # a new credential: the token once, with its connection snippet
    page.goto(f"/w/{ws}/settings/agent-access/")
    page.locator("input[name=name]").fill("Research assistant")
    page.locator("input[name=scopes]").first.check()
    page.locator("form.stack button[type=submit]").click()
    token = page.locator("#new-token").input_value()
    env = page.locator("#snippet-env").input_value()
    assert f"export GAM_TOKEN={token}" in env and re.search(
        r"export GAM_URL=http://(localhost|127\.0\.0\.1):\d+", env
    ), env
    config = json.loads(page.locator("#snippet-mcp").input_value())["mcpServers"]["agent-memory"]
    assert config["headers"]["Authorization"] == f"Bearer {token}" and config["url"].endswith("/mcp")
    expect(page.get_by_role("button", name=re.compile("MCP"))).to_be_visible()  # its copy button, shown by app.js
    look(session, "agent_access_snippet", language)
    page.goto(f"/w/{ws}/settings/agent-access/")
    assert token not in page.content()
    expect(page.locator("#snippet-env")).to_have_count(0)
