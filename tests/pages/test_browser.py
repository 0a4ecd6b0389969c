"""The pages in a real browser: Debian's Chromium driven by Playwright against pytest-django's
live server. Each test leaves a screenshot in tests/screenshots/ (kept by CI).

Never downloads a browser: it uses /usr/bin/chromium and skips when it is absent."""

from __future__ import annotations

import re

import pytest

from credits.models import UsageRecord
from governance import actions as governance_actions
from memoryapp import assistant
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, Source
from retention.models import DeletionReceipt
from tests.pages.headless import CHROMIUM, expect
from tests.support import make_agent

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]


def test_login_and_switch_ai_memory_off_shows_the_banner(world, open_session):
    session = open_session()
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    switch = page.get_by_role("switch", name="Let the assistant remember me")
    expect(switch).to_have_attribute("aria-checked", "true")
    session.shot("login_landing_ai_memory_en")
    switch.click()
    expect(page.locator(".messages")).to_contain_text("AI memory disabled")
    expect(page.locator(".banner-off")).to_have_text(
        re.compile("AI memory is off; the assistant currently does not read or add memories")
    )
    expect(page.get_by_role("switch", name="Let the assistant remember me")).to_have_attribute("aria-checked", "false")
    session.shot("ai_memory_switched_off_en")
    world.editor.refresh_from_db()
    assert world.editor.remember_me is False
    # keyboard only: focus the switch and press Space to turn it back on
    page.get_by_role("switch", name="Let the assistant remember me").focus()
    page.keyboard.press("Space")
    expect(page.locator(".messages")).to_contain_text("AI memory enabled")
    expect(page.locator(".banner-off")).to_have_count(0)


def test_add_a_memory_see_its_manual_tag_and_delete_it(world, open_session):
    session = open_session()
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    expect(page.get_by_text("No memories yet")).to_be_visible()
    page.get_by_role("link", name="Add").first.click()
    page.get_by_label("Type").select_option("preference")
    page.get_by_label("Topic").fill("communication_style")
    page.get_by_label("Summary").fill("Prefers short answers in Japanese; reach me at jane@example.com")
    page.get_by_label("Details").fill("Bullet points over prose\nNo emoji")
    session.shot("ai_memory_add_form_en")
    page.get_by_role("button", name="Save").click()
    card = page.locator("article.memory", has_text="communication_style")
    expect(card.locator(".badge--manual")).to_have_text("Manual")
    expect(card).to_contain_text("[EMAIL]")
    expect(page.locator(".messages")).to_contain_text("email address")
    assert "jane@example.com" not in page.content()
    session.shot("ai_memory_added_manual_en")
    card.get_by_role("link", name=re.compile("Delete")).click()
    expect(page.get_by_text("cannot be restored")).to_be_visible()
    session.shot("ai_memory_delete_confirm_en")
    page.get_by_role("button", name="Delete permanently").click()
    expect(page.locator(".messages")).to_contain_text("Memory deleted.")
    expect(page.get_by_text("No memories yet")).to_be_visible()
    assert not MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).exists()


def test_create_a_credential_and_see_the_token_once(world, open_session):
    session = open_session()
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    page.get_by_role("link", name="Agent access").click()
    read_box = page.get_by_role("checkbox", name=re.compile("memory:read"))
    write_box = page.get_by_role("checkbox", name=re.compile("memory:write"))
    expect(read_box).not_to_be_checked()
    expect(write_box).not_to_be_checked()
    page.get_by_label("Name").fill("Research assistant")
    read_box.check()
    write_box.check()
    page.get_by_role("button", name="Create credential").click()
    token_field = page.get_by_label("New token")
    token = token_field.input_value()
    assert len(token) > 20
    expect(page.get_by_role("button", name="Copy", exact=True)).to_be_visible()  # shown by app.js
    session.shot("agent_access_token_once_en")
    page.goto(page.url)
    expect(page.get_by_label("New token")).to_have_count(0)
    assert token not in page.content()
    expect(page.locator(".cred", has_text="Research assistant")).to_contain_text("Active")
    session.shot("agent_access_list_en")
    page.locator(".cred", has_text="Research assistant").get_by_role("button", name=re.compile("Revoke")).click()
    expect(page.locator(".cred", has_text="Research assistant")).to_contain_text("Revoked")


def test_a_viewer_sees_the_write_scope_disabled_with_its_reason(world, open_session):
    session = open_session()
    session.login("viewer@acme.test", "pw-viewer-123")
    session.page.goto(f"/w/{world.workspace.pk}/settings/agent-access/")
    expect(session.page.get_by_role("checkbox", name=re.compile("memory:write"))).to_be_disabled()
    expect(session.page.get_by_text("Needs the editor role or above; your role is viewer.")).to_be_visible()
    session.shot("agent_access_viewer_en")


def test_owner_deletes_all_agent_memories(world, open_session):
    make_agent(world.editor).remember(namespace="style", key="tone", text="Editor private tone note")
    make_agent(world.owner).remember(namespace="plans", key="q3", text="Owner private plan note")
    assistant.add_assistant_memory(
        world.editor, kind="fact", topic="kept_topic", summary="Assistant memory is kept", details=[]
    )
    session = open_session()
    session.login("owner@acme.test", "pw-owner-123")
    page = session.page
    page.get_by_role("link", name="Ask history").click()
    expect(page.get_by_text("applies to existing memories at once")).to_be_visible()
    page.get_by_role("link", name="Delete all agent memories…").click()
    expect(page.locator(".summary-list")).to_contain_text("2")
    assert "Editor private tone note" not in page.content()
    session.shot("ask_history_delete_all_confirm_en")
    page.get_by_role("button", name="Delete all agent memories").click()
    expect(page.locator(".messages")).to_contain_text("Deleted every agent memory")
    expect(page.get_by_role("table")).to_contain_text("Owner deleted all agent memories")
    session.shot("ask_history_receipts_en")
    assert not MemoryVersion.objects.filter(workspace=world.workspace).exclude(namespace=ASSISTANT_NAMESPACE).exists()
    assert MemoryVersion.objects.filter(namespace=ASSISTANT_NAMESPACE, key="kept_topic").exists()
    assert (
        DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk, operation="owner_bulk_delete").count() == 2
    )  # one per member (editor, owner)


def test_agent_memories_page_and_usage_page(world, open_session):
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone

    agent = make_agent(world.editor)
    agent.remember(namespace="crm", key="account_tier", text="Nagano Foods is on the Enterprise tier.")
    agent.remember(namespace="crm", key="account_tier", text="Nagano Foods moved to Enterprise Plus.")
    agent.remember(namespace="projects", key="q3_launch", text="Owns the Q3 launch checklist.")
    for days in range(0, 20, 3):
        UsageRecord.objects.create(
            workspace=world.workspace,
            member=world.editor,
            role="editor",
            category="ai_memory",
            model_name="offline-rules-v1",
            input_tokens=1500 + days * 40,
            output_tokens=300,
            input_cost=Decimal("0.015") + Decimal(days) / 1000,
            output_cost=Decimal("0.012"),
            created_at=timezone.now() - timedelta(days=days),
        )
    UsageRecord.objects.create(
        workspace=world.workspace,
        member=world.editor,
        role="editor",
        category="reply",
        model_name="chat-model",
        input_tokens=2400,
        output_tokens=350,
        memory_tokens=120,
        input_cost=Decimal("0.012"),
        output_cost=Decimal("0.007"),
    )
    session = open_session()
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    page.get_by_role("link", name="What Bundata remembers").click()
    expect(page.locator(".agent-list")).to_contain_text("Nagano Foods moved to Enterprise Plus.")
    page.get_by_label("Namespace").select_option("projects")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".agent-list")).not_to_contain_text("Nagano")
    session.shot("agent_memories_filtered_en")
    page.get_by_role("link", name="Clear").click()
    session.shot("agent_memories_en")
    page.get_by_role("link", name="Usage").click()
    expect(page.locator("svg.chart")).to_be_visible()
    expect(page.get_by_role("table")).to_contain_text("AI memory (input)")
    expect(page.get_by_role("table")).to_contain_text("already counted in input usage")
    session.shot("usage_en")


def test_every_page_in_japanese(world, open_session):
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
        topic="job_title",
        summary="マーケティング担当者です。",
        details=[],
        source=Source.AI_EXTRACTED,
    )
    assistant.add_assistant_memory(
        world.editor,
        kind="preference",
        topic="preferred_language",
        summary="日本語で回答する",
        details=[],
        source=Source.ASSISTANT_INITIATED,
    )
    make_agent(world.editor).remember(namespace="crm", key="tier", text="長野フーズはエンタープライズプランです。")
    session = open_session("ja")
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    for label in (
        "アシスタントに自分を覚えてもらう",
        "ユーザーの依頼",
        "アシスタントが自発的に記録",
        "AI 抽出",
        "期限切れのメモリ",
    ):
        expect(page.locator("main")).to_contain_text(label)
    session.shot("ai_memory_ja")
    page.get_by_role("switch", name="アシスタントに自分を覚えてもらう").click()
    expect(page.locator(".messages")).to_contain_text("AI メモリを無効にしました")
    expect(page.locator(".banner-off")).to_contain_text(
        "AI メモリは無効です。アシスタントは現在、メモリの読み取りや追加を行いません"
    )
    session.shot("ai_memory_off_ja")
    page.get_by_role("link", name="追加").first.click()
    page.get_by_label("トピック").fill("Not Snake")
    page.get_by_label("要約").fill("テスト")
    page.get_by_role("button", name="保存").click()
    expect(page.locator(".field-errors")).to_contain_text("snake_case")
    session.shot("ai_memory_add_error_ja")
    ws = world.workspace.pk
    for path, name, text in (
        (f"/w/{ws}/what-bundata-remembers/", "agent_memories_ja", "Agent メモリ"),
        (f"/w/{ws}/settings/agent-access/", "agent_access_ja", "認証情報を作成"),
        (f"/w/{ws}/usage/", "usage_empty_ja", "使用量はまだありません"),
    ):
        page.goto(path)
        expect(page.locator("main")).to_contain_text(text)
        session.shot(name)


def test_the_organization_flag_off_disables_the_switch(world, open_session):
    governance_actions.set_ai_memory_available(world.workspace, False, actor=None)
    session = open_session()
    session.login("editor@acme.test", "pw-editor-123")
    expect(session.page.get_by_role("switch", name="Let the assistant remember me")).to_be_disabled()
    expect(session.page.locator("#add-unavailable")).to_have_text(
        re.compile("AI memory is not enabled for your organization")
    )
    session.shot("ai_memory_organization_off_en")


def test_switch_workspace_and_language_from_the_header(world, open_session):
    second, _ = governance_actions.create_workspace("Initech", owner_email="boss@initech.test")
    governance_actions.add_member(second, "editor@acme.test", role="viewer")
    session = open_session()
    session.login("editor@acme.test", "pw-editor-123")
    page = session.page
    page.locator(".switcher summary").click()
    session.shot("workspace_switcher_en")
    page.get_by_role("link", name=re.compile("Initech")).click()
    page.wait_for_url(re.compile(rf"/w/{second.pk}/ai-memory/$"))
    page.get_by_role("button", name="日本語").click()
    expect(page.locator("h1")).to_have_text("AI メモリ")
    page.get_by_role("button", name="English").click()
    expect(page.locator("h1")).to_have_text("AI memory")
