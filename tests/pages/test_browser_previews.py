"""Erase previews in Chromium, as an owner would try them (issue 17 §3): lower retention on the
settings page → the preview says how many → save → receipts with exactly that many; the delete-all
confirmations and the admin's erase-member confirmation show the manifest. Every preview view at
390 and 1280 px in English and Japanese fits the screen; screenshots in tests/screenshots/previews/."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import AskHistorySettings
from memoryapp.models import ASSISTANT_NAMESPACE, AccessEntry, MemoryEmbedding, MemoryVersion
from retention.models import DeletionReceipt, Operation
from tests.pages.headless import CHROMIUM, SCREENSHOTS, Session, expect, measure

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]

SHOTS = SCREENSHOTS / "previews"
AGENT_MEMORIES, ASSISTANT_MEMORIES = 1204, 87


def plant(member, count: int, *, namespace: str, days_old: int) -> list[int]:
    anchor = timezone.now() - timedelta(days=days_old, hours=6)
    MemoryVersion.objects.bulk_create(
        MemoryVersion(
            workspace_id=member.workspace_id,
            member=member,
            namespace=namespace,
            key=f"{namespace}_{i}",
            text=f"planted note {i}",
            text_length=14,
            created_at=anchor,
            valid_from=anchor,
            retention_anchor=anchor + timedelta(seconds=i),
        )
        for i in range(count)
    )
    ids = list(
        MemoryVersion.objects.filter(member=member, namespace=namespace).order_by("pk").values_list("pk", flat=True)
    )
    MemoryEmbedding.objects.bulk_create(
        MemoryEmbedding(memory_id=pk, embedder_id="test", dim=1, vector=b"\0\0\0\0") for pk in ids
    )
    return ids


def fit(session: Session, name: str, width: int) -> None:
    page = session.page
    page.set_viewport_size({"width": width, "height": 860})
    found = measure(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SHOTS / f"{name}_{width}.png"), full_page=True)
    assert found["scrollWidth"] <= found["innerWidth"] and not found["wide"], (name, width, found)


@pytest.mark.parametrize("language", ["en", "ja"])
def test_lowering_retention_previews_the_count_then_saving_erases_exactly_that(world, chromium, live_server, language):
    ws = world.workspace.pk
    owner_ids = plant(world.owner, 700, namespace="crm", days_old=40)
    plant(world.editor, AGENT_MEMORIES - 700, namespace="projects", days_old=45)
    plant(world.editor, 25, namespace="recent", days_old=3)  # younger than 30 days: kept
    plant(world.editor, ASSISTANT_MEMORIES, namespace=ASSISTANT_NAMESPACE, days_old=40)
    AccessEntry.objects.create(
        workspace=world.workspace,
        member=world.owner,
        credential_ref=1,
        credential_name="claude-desktop",
        operation="recall",
        surface="mcp",
        returned=3,
        hidden=0,
        memories=[{"id": pk, "v": 1} for pk in owner_ids[:3]],
    )
    session = Session(chromium, live_server.url, language)
    try:
        session.login("owner@acme.test", "pw-owner-123")
        page = session.page
        page.goto(f"/w/{ws}/settings/ask-history/")
        page.locator("input[name=agent_memory_retention_days]").fill("30")
        page.locator("form.stack button[type=submit]").click()
        preview = page.get_by_test_id("retention-preview").first
        expected = {
            "en": "Lowering retention to 30 days erases 1,204 agent memories now and moves 87 assistant memories to "
            "Expired.",
            "ja": "保持期間を30日に短縮すると、Agent メモリ 1,204 件が今すぐ消去され、"
            "AI メモリ 87 件が期限切れに移ります。",
        }[language]
        expect(preview).to_have_text(expected)
        expect(page.locator("[data-artifact=memory_version] dd")).to_have_text("1,204")
        expect(page.locator("[data-artifact=access_log_entry] dd")).to_have_text("1")
        for width in (390, 1280):
            fit(session, f"retention_preview_{language}", width)
        assert (
            MemoryVersion.objects.filter(workspace=world.workspace).count() == AGENT_MEMORIES + 25 + ASSISTANT_MEMORIES
        )  # nothing yet
        assert AskHistorySettings.objects.get(workspace=world.workspace).agent_memory_retention_days == 90
        page.set_viewport_size({"width": 1280, "height": 860})
        page.locator("form.form-actions button[type=submit]").click()
        page.wait_for_url(re.compile(r"/settings/ask-history/$"))
        receipts = DeletionReceipt.objects.filter(workspace_ref=ws, operation=Operation.EXPIRY)
        assert sum(r.versions_erased for r in receipts) == AGENT_MEMORIES
        assert sum(r.manifest["artifacts"]["access_log_entry"] for r in receipts) == 1
        assert (
            MemoryVersion.objects.filter(
                workspace=world.workspace, namespace=ASSISTANT_NAMESPACE, state="expired"
            ).count()
            == ASSISTANT_MEMORIES
        )
        assert (
            MemoryVersion.objects.filter(workspace=world.workspace).exclude(namespace=ASSISTANT_NAMESPACE).count() == 25
        )
        expect(page.locator(".message").first).to_contain_text("1,204")
        fit(session, f"retention_saved_{language}", 1280)
    finally:
        session.context.close()


@pytest.mark.parametrize("language", ["en", "ja"])
def test_the_delete_all_confirmations_show_the_manifest(world, chromium, live_server, language):
    ws = world.workspace.pk
    plant(world.owner, 12, namespace="crm", days_old=1)
    plant(world.editor, 30, namespace="projects", days_old=1)
    session = Session(chromium, live_server.url, language)
    try:
        session.login("owner@acme.test", "pw-owner-123")
        page = session.page
        page.goto(f"/w/{ws}/what-bundata-remembers/delete-all/")
        expect(page.locator("[data-artifact=memory_version] dd")).to_have_text("12")
        for width in (390, 1280):
            fit(session, f"member_delete_all_preview_{language}", width)
        page.goto(f"/w/{ws}/settings/ask-history/delete-agent-memories/")
        expect(page.locator("[data-artifact=memory_version] dd")).to_have_text("42")
        expect(page.locator("[data-artifact=members] dd")).to_have_text("2")
        for width in (390, 1280):
            fit(session, f"owner_delete_all_preview_{language}", width)
        page.set_viewport_size({"width": 1280, "height": 860})
        page.locator("form.form-actions button[type=submit]").click()
        page.wait_for_url(re.compile(r"/settings/ask-history/$"))
        receipts = DeletionReceipt.objects.filter(workspace_ref=ws, operation=Operation.OWNER_BULK_DELETE)
        assert sorted(r.versions_erased for r in receipts) == [12, 30]
    finally:
        session.context.close()


def test_the_admin_erase_member_confirmation_shows_the_manifest(world, chromium, live_server, django_user_model):
    plant(world.editor, 9, namespace="projects", days_old=1)
    plant(world.editor, 4, namespace=ASSISTANT_NAMESPACE, days_old=1)
    django_user_model.objects.create_superuser("root", "root@acme.test", "pw-root-123")
    session = Session(chromium, live_server.url, "en")
    try:
        page = session.page
        page.goto("/admin/login/")
        page.locator("#id_username").fill("root")
        page.locator("#id_password").fill("pw-root-123")
        page.locator("input[type=submit]").click()
        page.wait_for_url(re.compile(r"/admin/$"))
        page.goto("/admin/governance/member/")
        page.locator(f"input[name=_selected_action][value='{world.editor.pk}']").check()
        page.locator("select[name=action]").select_option("erase_member_memories")
        page.locator("button[name=index]").click()
        expect(page.locator("table.governed-summary")).to_contain_text("memory versions to erase")
        expect(page.locator("table.governed-summary")).to_contain_text("13 / 4")
        assert MemoryVersion.objects.filter(member=world.editor).count() == 13
        for width in (390, 1280):
            session.page.set_viewport_size({"width": width, "height": 860})
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"admin_erase_member_preview_en_{width}.png"), full_page=True)
    finally:
        session.context.close()
