"""Every page fits (SPEC §7): at 390 px no page scrolls sideways, at 1280 px every table column is
visible — in English and Japanese, with the long content that breaks layouts (120-character keys,
1,000-character texts, long Japanese, 20 citations, long names and emails, 60 usage records).

The pages are enumerated from the URLconf: a page route added without a place here fails
`test_every_page_route_is_checked_for_fit`. Screenshots land in tests/screenshots/fit/."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from credits.models import UsageRecord
from governance import actions as governance
from governance.models import Workspace
from memoryapp import assistant
from memoryapp.models import MemoryVersion, Source
from retention import lifecycle
from tests.pages.headless import CHROMIUM, SCREENSHOTS, Session, measure
from tests.support import make_agent

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install -y chromium)"),
    pytest.mark.django_db(transaction=True),
]

WIDTHS = (390, 1280)
FIT = SCREENSHOTS / "fit"
LONG_WORKSPACE = "Acme Rockets Asia-Pacific Enterprise Division (Tokyo, Osaka, Singapore, Sydney)"
LONG_NAMESPACE = "customer-relationship-management-apac-enterprise-accounts-2025"
LONG_KEY = (
    "quarterly_business_review_preparation_notes_for_the_enterprise_plus_renewal_"
    "with_procurement_legal_and_security_teams"
)[:120]
LONG_URL = (
    "https://intranet.acme-rockets.example.com/handbooks/enterprise/onboarding/apac/2025/checklists/final-v12.pdf"
)
LONG_TEXT = (
    "The customer asked that every quarterly review starts with the renewal timeline, then the open security "
    f"questionnaire items, then the integration roadmap; the checklist lives at {LONG_URL}. " * 5
)[:1000]
JAPANESE = (
    "長野フーズ様の四半期レビューでは、まず契約更新のスケジュールを確認し、次にセキュリティ質問票の未回答項目、"
    "最後に連携ロードマップを説明してください。担当者は調達部と法務部の双方で、資料は日本語と英語の両方を用意すること。"
) * 3
LONG_TOPIC = "preferred_structure_for_quarterly_business_reviews_with_enterprise_customers_in_the_asia_pacific_region"
LONG_EMAIL = "very.long.member.address.for.layout.testing@subsidiary.example-corporation.co.jp"
# Page routes that only answer POST (a GET answers 405): nothing to look at.
POST_ONLY = {"ai-memory-preference", "ai-memory-reactivate", "agent-access-revoke", "agent-memory-delete", "logout"}


def page_route_names() -> set[str]:
    """Every named route of the pages URLconf (memoryapp.pages.urls), includes followed."""
    names: set[str] = set()

    def walk(patterns) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.namespace in (None, "pages"):
                    walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and pattern.name:
                names.add(pattern.name)

    for entry in get_resolver().url_patterns:
        if isinstance(entry, URLResolver) and entry.namespace == "pages":
            walk(entry.url_patterns)
    return names - {"set_language"}  # django.conf.urls.i18n: POST only, no page


def long_content(world):
    """The owner's workspace, full of what breaks layouts."""
    Workspace.objects.filter(pk=world.workspace.pk).update(name=LONG_WORKSPACE)
    world.workspace.refresh_from_db()
    owner = world.owner
    long_member = governance.add_member(world.workspace, LONG_EMAIL, role="editor")
    collection = governance.create_collection(
        world.workspace, name="Enterprise customer onboarding handbook — APAC region (2025 edition, final)"
    )
    document = governance.create_document(
        collection,
        title="Onboarding",
        text="\n\n".join(f"Passage {i}: onboarding step {i} of the enterprise checklist." for i in range(20)),
    )
    passages = [str(p.pk) for p in document.passages.order_by("pk")]
    context_set = governance.create_context_set(
        world.workspace,
        name="Enterprise onboarding — APAC, Japan and Australia accounts only (read-only agents)",
        collections=[collection],
        documents=[],
    )
    agent = make_agent(owner)
    for body in (
        {
            "namespace": LONG_NAMESPACE,
            "key": LONG_KEY,
            "text": LONG_TEXT,
            "collectionId": str(collection.pk),
            "citations": passages,
        },
        {
            "namespace": LONG_NAMESPACE,
            "key": LONG_KEY,
            "text": LONG_TEXT.replace("quarterly", "half-yearly")[:1000],
            "collectionId": str(collection.pk),
            "citations": passages,
        },
        {"namespace": "crm", "key": "account_tier", "text": JAPANESE, "citations": passages[:3]},
        {"namespace": "projects", "text": f"Owns the Q3 launch checklist ({LONG_URL})."},
        {
            "namespace": "長野フーズ_営業メモ",
            "key": "次回の打ち合わせ",
            "text": "次回の打ち合わせは火曜日の午前中を希望。",
        },
    ):
        created = agent.remember(**body)
        assert created.status_code == 201, created.content
    for i in range(3):
        assert agent.remember(namespace="temporary", key=f"note_{i}", text=f"Temporary note {i}").status_code == 201
        assert agent.forget(namespace="temporary", key=f"note_{i}").status_code == 200
    version, _ = assistant.add_assistant_memory(
        owner,
        kind="instruction",
        topic=LONG_TOPIC,
        summary=JAPANESE[:900],
        details=[LONG_URL, "箇条書きで、結論を先に書く", "x" * 200],
        source=Source.USER_REQUEST,
    )
    assistant.add_assistant_memory(
        owner,
        kind="preference",
        topic="preferred_language",
        summary="日本語で回答する",
        details=[],
        source=Source.ASSISTANT_INITIATED,
    )
    expired, _ = assistant.add_assistant_memory(
        owner,
        kind="fact",
        topic="old_office_location",
        summary="The office used to be in Shinagawa.",
        details=[],
        source=Source.AI_EXTRACTED,
    )
    MemoryVersion.objects.filter(pk=expired.pk).update(retention_anchor=timezone.now() - timedelta(days=100))
    lifecycle.expiry_sweep()
    for name, extra in (
        ("Research assistant for the enterprise onboarding programme (APAC, read and write)", {}),
        ("Scoped reader", {"context_set": context_set}),
    ):
        governance.create_credential(
            owner,
            name=name,
            scopes=["memory:read", "memory:write"],
            expires_at=timezone.now() + timedelta(days=30),
            **extra,
        )
    for i in range(60):
        member = (owner, world.editor, long_member)[i % 3]
        UsageRecord.objects.create(
            workspace=world.workspace,
            member=member,
            role=member.role,
            category="reply" if i % 4 == 0 else "ai_memory",
            model_name="offline-rules-v1" if i % 4 else "a-very-long-chat-model-name-2025-preview-experimental",
            input_tokens=1500 + i * 40,
            output_tokens=300 + i,
            memory_tokens=120 if i % 4 == 0 else 0,
            input_cost=Decimal("0.015") + Decimal(i) / 1000,
            output_cost=Decimal("0.012"),
            created_at=timezone.now() - timedelta(hours=9 * i),
        )
    return version


def check(session: Session, name: str, language: str, width: int) -> None:
    page = session.page
    page.set_viewport_size({"width": width, "height": 860})
    found = measure(page)
    FIT.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    # the whole page, down to a tall phone's worth (a 50-record history stacks to ~20,000 px)
    height = min(page.evaluate("document.documentElement.scrollHeight"), 1800)
    page.screenshot(
        path=str(FIT / f"{name}_{language}_{width}.png"),
        full_page=True,
        clip={"x": 0, "y": 0, "width": width, "height": height},
    )
    assert found["scrollWidth"] <= found["innerWidth"], (name, language, width, found)
    assert not found["wide"], (name, language, width, found)
    # every column visible: no table needs its own scrollbar, no cell is past the right edge
    assert found["scrolling"] == 0 and found["clipped"] == 0, (name, language, width, found)


def visit(session: Session, path: str, name: str, language: str, *, expect_status: int = 200) -> None:
    response = session.page.goto(path)
    assert response is not None and response.status == expect_status, (name, response and response.status)
    for width in WIDTHS:
        check(session, name, language, width)


def test_every_page_route_is_checked_for_fit():
    covered = {
        "home",
        "login",
        "ai-memory",
        "ai-memory-add",
        "ai-memory-edit",
        "ai-memory-delete",
        "agent-memories",
        "agent-memories-delete-all",
        "agent-access",
        "ask-history",
        "ask-history-delete-all",
        "usage",
    }
    assert page_route_names() == covered | POST_ONLY


def test_post_only_page_routes_answer_405_to_a_get(world):
    client = Client()
    client.force_login(world.owner.user)
    ws = world.workspace.pk
    for path in (
        f"/w/{ws}/ai-memory/preference/",
        f"/w/{ws}/ai-memory/1/reactivate/",
        f"/w/{ws}/settings/agent-access/1/revoke/",
        f"/w/{ws}/what-bundata-remembers/1/delete/",
        "/accounts/logout/",
    ):
        assert client.get(path).status_code == 405, path


@pytest.mark.parametrize("language", ["en", "ja"])
# the fixture
def test_every_page_fits_at_390_and_1280(world, chromium, live_server, django_user_model, language):
    assistant_version = long_content(world)
    django_user_model.objects.create_user(
        username="nobody@acme.test", email="nobody@acme.test", password="pw-nobody-123"
    )
    ws = world.workspace.pk
    anonymous = Session(chromium, live_server.url, language)
    try:
        visit(anonymous, "/accounts/login/", "login", language)
        visit(anonymous, f"/w/{ws}/ai-memory/", "login_redirected", language)
    finally:
        anonymous.context.close()

    owner = Session(chromium, live_server.url, language)
    try:
        owner.login("owner@acme.test", "pw-owner-123")
        for path, name in (
            (f"/w/{ws}/ai-memory/", "ai_memory"),
            (f"/w/{ws}/ai-memory/add/", "ai_memory_add"),
            (f"/w/{ws}/ai-memory/{assistant_version.pk}/edit/", "ai_memory_edit"),
            (f"/w/{ws}/ai-memory/{assistant_version.pk}/delete/", "ai_memory_delete"),
            (f"/w/{ws}/what-bundata-remembers/", "agent_memories"),
            (f"/w/{ws}/what-bundata-remembers/?namespace={LONG_NAMESPACE}", "agent_memories_filtered"),
            (f"/w/{ws}/what-bundata-remembers/delete-all/", "agent_memories_delete_all"),
            (f"/w/{ws}/settings/agent-access/", "agent_access"),
            (f"/w/{ws}/settings/ask-history/", "ask_history"),
            (f"/w/{ws}/settings/ask-history/delete-agent-memories/", "ask_history_delete_all"),
            (f"/w/{ws}/usage/", "usage"),
            (f"/w/{ws}/usage/?page=2", "usage_page_2"),
        ):
            visit(owner, path, name, language)
        # the one-time token page: the response to the form's POST
        owner.page.goto(f"/w/{ws}/settings/agent-access/")
        owner.page.locator("input[name=name]").fill("Token page check with a long credential name for the layout")
        owner.page.locator("input[name=scopes]").first.check()
        owner.page.locator("form.stack button[type=submit]").click()
        owner.page.wait_for_selector("#new-token")
        for width in WIDTHS:
            check(owner, "agent_access_token", language, width)
        # the header menu folds at 390 px and opens without JavaScript
        owner.page.set_viewport_size({"width": 390, "height": 860})
        owner.page.goto(f"/w/{ws}/usage/")
        owner.page.locator(".menu > summary").click()
        menu_link = owner.page.locator(".menu-panel a[href$='/settings/agent-access/']")
        assert menu_link.is_visible()
        check(owner, "header_menu_open", language, 390)
        menu_link.click()
        owner.page.wait_for_url(re.compile(r"/settings/agent-access/$"))
        visit(owner, f"/w/{ws + 999}/ai-memory/", "not_found", language, expect_status=404)
    finally:
        owner.context.close()

    editor = Session(chromium, live_server.url, language)
    try:
        editor.login("editor@acme.test", "pw-editor-123")
        visit(editor, f"/w/{ws}/settings/ask-history/", "forbidden", language, expect_status=403)
    finally:
        editor.context.close()

    nobody = Session(chromium, live_server.url, language)
    try:
        nobody.page.goto("/accounts/login/")
        nobody.page.locator("input[name=username]").fill("nobody@acme.test")
        nobody.page.locator("input[name=password]").fill("pw-nobody-123")
        nobody.page.locator("form button[type=submit]").first.click()
        nobody.page.wait_for_selector("main .auth-card h1")
        for width in WIDTHS:
            check(nobody, "no_workspace", language, width)
    finally:
        nobody.context.close()


def test_the_admin_index_fits(world, chromium, live_server, django_user_model):
    long_content(world)
    django_user_model.objects.create_superuser("root", "root@acme.test", "pw-root-123")
    session = Session(chromium, live_server.url, "en")
    try:
        session.page.goto("/admin/login/")
        session.page.locator("#id_username").fill("root")
        session.page.locator("#id_password").fill("pw-root-123")
        session.page.locator("input[type=submit]").click()
        session.page.wait_for_url(re.compile(r"/admin/$"))
        for width in WIDTHS:
            session.page.set_viewport_size({"width": width, "height": 860})
            found = measure(session.page)
            FIT.mkdir(parents=True, exist_ok=True)
            session.page.screenshot(path=str(FIT / f"admin_index_en_{width}.png"), full_page=True)
            assert found["scrollWidth"] <= found["innerWidth"], found
    finally:
        session.context.close()
