"""Pages for people (SPEC §7): who may open each page, what it shows, what each form changes —
and that no page ever shows another member's memory text, the owner's pages included."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from credits.models import UsageRecord
from governance import actions as governance_actions
from governance.models import Credential, Member
from memoryapp import assistant
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, Source
from retention.models import DeletionReceipt
from tests.pages.support import browser, messages_of, text_of, url
from tests.support import make_agent

pytestmark = pytest.mark.django_db

EDITOR_SECRET = "Editor prefers the Lapis tone of voice"
OWNER_SECRET = "Owner keeps the Quartz roadmap private"
EDITOR_ASSISTANT_SECRET = "Editor codename is Aurora Borealis"


@pytest.fixture
def planted(world):
    """Agent and assistant memories for the editor and the owner, so leaks would show."""
    editor_agent = make_agent(world.editor)
    owner_agent = make_agent(world.owner)
    assert editor_agent.remember(namespace="style", key="tone", text=EDITOR_SECRET).status_code == 201
    assert owner_agent.remember(namespace="plans", key="roadmap", text=OWNER_SECRET).status_code == 201
    assistant.add_assistant_memory(
        world.editor,
        kind="fact",
        topic="product_codename",
        summary=EDITOR_ASSISTANT_SECRET,
        details=[],
        source=Source.USER_REQUEST,
    )
    return world


# --- who may open which page ---------------------------------------------------------------------
MEMBER_PAGES = ["agent-memories", "ai-memory", "agent-access", "usage"]


@pytest.mark.parametrize("page", [*MEMBER_PAGES, "ask-history"])
def test_anonymous_visitors_are_sent_to_the_login_page(world, page):
    response = browser().get(url(world, page))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.parametrize("page", [*MEMBER_PAGES, "ask-history"])
def test_an_outsider_gets_404_for_every_page_of_a_workspace_they_do_not_belong_to(world, page):
    assert browser(world.outsider).get(url(world, page)).status_code == 404


@pytest.mark.parametrize("page", MEMBER_PAGES)
@pytest.mark.parametrize("who", ["owner", "editor", "viewer"])
def test_every_member_opens_the_member_pages(world, page, who):
    response = browser(getattr(world, who)).get(url(world, page))
    assert response.status_code == 200
    assert response["Content-Security-Policy"].startswith("default-src 'self'")


@pytest.mark.parametrize("who", ["editor", "viewer"])
def test_ask_history_settings_are_for_owners_only(world, who):
    client = browser(getattr(world, who))
    assert client.get(url(world, "ask-history")).status_code == 403
    assert (
        client.post(url(world, "ask-history"), {"agent_memory_retention_days": 5, "expired_grace_days": 1}).status_code
        == 403
    )
    assert client.post(f"/w/{world.workspace.pk}/settings/ask-history/delete-agent-memories/").status_code == 403
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.agent_memory_retention_days == 90


def test_the_navigation_shows_ask_history_only_to_owners(world):
    assert "/settings/ask-history/" in text_of(browser(world.owner).get(url(world, "ai-memory")))
    assert "/settings/ask-history/" not in text_of(browser(world.editor).get(url(world, "ai-memory")))


def test_a_removed_member_no_longer_opens_the_pages(world):
    governance_actions.remove_member(world.editor, actor=world.owner.user)
    assert browser(world.editor).get(url(world, "ai-memory")).status_code == 404


def test_a_workspace_id_that_is_not_a_number_is_404(world):
    assert browser(world.editor).get("/w/abc/ai-memory/").status_code == 404


# --- login, home, switcher, language -------------------------------------------------------------
def test_login_with_email_and_password_lands_on_the_first_workspace_ai_memory_page(world):
    client = browser()
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "Editor@Acme.test", "password": "pw-editor-123"})
    assert response.status_code == 302
    response = client.get(response["Location"])
    assert response.status_code == 302
    assert response["Location"] == f"/w/{world.workspace.pk}/ai-memory/"


def test_a_wrong_password_shows_an_error(world):
    response = browser().post("/accounts/login/", {"username": "editor@acme.test", "password": "nope"})
    assert response.status_code == 200
    assert response.context["form"].errors


def test_home_sends_anonymous_visitors_to_login(world):
    response = browser().get("/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"


def test_logout_is_a_post_and_ends_the_session(world):
    client = browser(world.editor)
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    assert client.get(url(world, "ai-memory")).status_code == 302


def test_the_workspace_switcher_lists_only_the_users_workspaces_and_keeps_the_page(world):
    second = governance_actions.create_workspace("Initech", owner_email="someone@initech.test")[0]
    governance_actions.add_member(second, "editor@acme.test", role="viewer")
    html = text_of(browser(world.editor).get(url(world, "usage")))
    assert f"/w/{second.pk}/usage/" in html
    assert "Initech" in html and "Globex" not in html


def test_the_switcher_lands_on_ai_memory_where_the_page_needs_a_permission_the_user_lacks(world):
    second = governance_actions.create_workspace("Initech", owner_email="someone@initech.test")[0]
    governance_actions.add_member(second, "owner@acme.test", role="viewer")
    html = text_of(browser(world.owner).get(url(world, "ask-history")))
    assert f"/w/{second.pk}/ai-memory/" in html
    assert f"/w/{second.pk}/settings/ask-history/" not in html


def test_accept_language_japanese_renders_the_seed_labels(world):
    html = text_of(browser(world.editor, language="ja").get(url(world, "ai-memory")))
    for label in (
        "アシスタントに自分を覚えてもらう",
        "メモリはまだありません",
        "期限切れのメモリ",
        "ユーザーの依頼",
        "アシスタントが自発的に記録",
        "手動追加",
        "AI 抽出",
        "追加",
        "更新",
    ):
        assert label in html, label
    assert '<html lang="ja">' in html


def test_the_language_switcher_sets_the_language_for_later_pages(world):
    client = browser(world.editor)
    response = client.post("/i18n/setlang/", {"language": "ja", "next": url(world, "ai-memory")})
    assert response.status_code == 302 and response["Location"] == url(world, "ai-memory")
    assert "アシスタントに自分を覚えてもらう" in text_of(client.get(url(world, "ai-memory")))


def test_posts_without_a_csrf_token_are_refused(world):
    client = browser(world.editor, csrf_checks=True)
    assert client.post(f"/w/{world.workspace.pk}/ai-memory/preference/", {"remember_me": "off"}).status_code == 403
    world.editor.refresh_from_db()
    assert world.editor.remember_me is True


def test_every_form_carries_a_csrf_token(world, planted):
    client = browser(world.owner)
    for page in (*MEMBER_PAGES, "ask-history"):
        html = text_of(client.get(url(world, page)))
        forms = re.findall(r"<form[^>]*method=\"post\"[^>]*>(.*?)</form>", html, flags=re.S)
        assert forms, page
        assert all("csrfmiddlewaretoken" in form for form in forms), page


# --- What Bundata remembers → Agent memories -----------------------------------------------------
def test_agent_memories_page_lists_own_agent_memories_with_their_details(world, planted):
    html = text_of(browser(world.editor).get(url(world, "agent-memories")))
    assert EDITOR_SECRET in html
    assert "style" in html and "tone" in html
    assert EDITOR_ASSISTANT_SECRET not in html  # assistant memories live on the AI memory page


def test_agent_memories_page_shows_collection_and_citation_state(world):
    collection = governance_actions.create_collection(world.workspace, name="Handbook")
    document = governance_actions.create_document(collection, title="Guide", text="First passage.\n\nSecond passage.")
    passage = document.current_version.passages.first()
    agent = make_agent(world.editor)
    assert (
        agent.remember(
            namespace="docs",
            key="guide",
            text="The guide says hello",
            collectionId=str(collection.pk),
            citations=[str(passage.pk)],
        ).status_code
        == 201
    )
    html = text_of(browser(world.editor).get(url(world, "agent-memories")))
    assert "Handbook" in html and "Current" in html
    governance_actions.add_document_version(document, text="First passage changed.\n\nSecond passage.")
    html = text_of(browser(world.editor).get(url(world, "agent-memories")))
    assert "Changed" in html


def test_agent_memories_filter_by_namespace(world):
    agent = make_agent(world.editor)
    agent.remember(namespace="alpha", text="Alpha note about tea")
    agent.remember(namespace="beta", text="Beta note about coffee")
    html = text_of(browser(world.editor).get(url(world, "agent-memories") + "?namespace=alpha"))
    assert "Alpha note about tea" in html and "Beta note about coffee" not in html


def test_agent_memories_empty_state(world):
    assert "No agent memories yet" in text_of(browser(world.editor).get(url(world, "agent-memories")))


def test_deleting_one_agent_memory_erases_all_its_versions(world):
    agent = make_agent(world.editor)
    agent.remember(namespace="style", key="tone", text="First tone")
    memory_id = agent.remember(namespace="style", key="tone", text="Second tone").json()["memory"]["id"]
    response = browser(world.editor).post(
        f"/w/{world.workspace.pk}/what-bundata-remembers/{memory_id}/delete/", follow=True
    )
    assert response.redirect_chain[-1][0] == url(world, "agent-memories")
    assert any("2 versions" in m for m in messages_of(response))
    assert not MemoryVersion.objects.filter(member=world.editor, namespace="style").exists()


def test_deleting_someone_elses_agent_memory_is_refused_and_changes_nothing(world, planted):
    owner_memory = MemoryVersion.objects.get(member=world.owner, namespace="plans")
    response = browser(world.editor).post(
        f"/w/{world.workspace.pk}/what-bundata-remembers/{owner_memory.pk}/delete/", follow=True
    )
    assert any("No such memory" in m for m in messages_of(response))
    assert MemoryVersion.objects.filter(pk=owner_memory.pk).exists()


def test_the_agent_memory_delete_form_cannot_delete_an_assistant_memory(world, planted):
    assistant_memory = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE)
    browser(world.editor).post(f"/w/{world.workspace.pk}/what-bundata-remembers/{assistant_memory.pk}/delete/")
    assert MemoryVersion.objects.filter(pk=assistant_memory.pk).exists()


def test_delete_all_own_agent_memories_asks_first_then_deletes_only_own_agent_memories(world, planted):
    client = browser(world.editor)
    confirm = client.get(f"/w/{world.workspace.pk}/what-bundata-remembers/delete-all/")
    assert confirm.status_code == 200 and "1 agent memory" in text_of(confirm)
    assert MemoryVersion.objects.filter(member=world.editor, namespace="style").exists()
    token = re.search(r'name="planToken" value="([0-9a-f]{64})"', confirm.content.decode()).group(1)
    assert (
        client.post(f"/w/{world.workspace.pk}/what-bundata-remembers/delete-all/", {"planToken": token}).status_code
        == 302
    )
    assert not MemoryVersion.objects.filter(member=world.editor).exclude(namespace=ASSISTANT_NAMESPACE).exists()
    assert MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).exists()
    assert MemoryVersion.objects.filter(member=world.owner, namespace="plans").exists()


def test_the_delete_form_returns_to_the_filtered_list_but_never_off_site(world):
    agent = make_agent(world.editor)
    memory_id = agent.remember(namespace="alpha", text="Alpha note").json()["memory"]["id"]
    other_id = agent.remember(namespace="alpha", text="Another alpha note").json()["memory"]["id"]
    client = browser(world.editor)
    response = client.post(
        f"/w/{world.workspace.pk}/what-bundata-remembers/{memory_id}/delete/",
        {"next": url(world, "agent-memories") + "?namespace=alpha"},
    )
    assert response["Location"] == url(world, "agent-memories") + "?namespace=alpha"
    response = client.post(
        f"/w/{world.workspace.pk}/what-bundata-remembers/{other_id}/delete/", {"next": "https://evil.test/"}
    )
    assert response["Location"] == url(world, "agent-memories")


def test_agent_memories_paginate_with_an_older_link(world, monkeypatch):
    from memoryapp.pages.views import agent_memories

    monkeypatch.setattr(agent_memories, "PAGE_SIZE", 2)
    agent = make_agent(world.editor)
    for i in range(3):
        agent.remember(namespace="many", text=f"Numbered note {i}")
    client = browser(world.editor)
    html = text_of(client.get(url(world, "agent-memories")))
    assert "Numbered note 2" in html and "Numbered note 0" not in html
    cursor = re.search(r"cursor=([^\"&]+)", html).group(1)
    html = text_of(client.get(url(world, "agent-memories") + f"?cursor={cursor}"))
    assert "Numbered note 0" in html and "Numbered note 2" not in html
    assert client.get(url(world, "agent-memories") + "?cursor=garbage").status_code == 302


# --- AI memory -----------------------------------------------------------------------------------
def test_ai_memory_switch_off_shows_the_confirmation_and_the_banner(world):
    client = browser(world.editor)
    response = client.post(f"/w/{world.workspace.pk}/ai-memory/preference/", {"remember_me": "off"}, follow=True)
    html = text_of(response)
    assert "AI memory disabled" in messages_of(response)
    assert "AI memory is off; the assistant currently does not read or add memories" in html
    assert 'aria-checked="false"' in html
    world.editor.refresh_from_db()
    assert world.editor.remember_me is False
    response = client.post(f"/w/{world.workspace.pk}/ai-memory/preference/", {"remember_me": "on"}, follow=True)
    assert "AI memory enabled" in messages_of(response)
    assert "AI memory is off" not in text_of(response)
    world.editor.refresh_from_db()
    assert world.editor.remember_me is True


def test_the_switch_only_changes_the_members_own_preference(world):
    browser(world.editor).post(f"/w/{world.workspace.pk}/ai-memory/preference/", {"remember_me": "off"})
    assert Member.objects.get(pk=world.owner.pk).remember_me is True
    assert Member.objects.get(pk=world.viewer.pk).remember_me is True


def test_platform_flag_off_disables_the_switch_and_says_why(world):
    governance_actions.set_ai_memory_available(world.workspace, False, actor=None)
    client = browser(world.editor)
    html = text_of(client.get(url(world, "ai-memory")))
    assert "AI memory is not enabled for your organization" in html
    assert re.search(r'role="switch" aria-checked="false"[^>]*disabled', html)
    response = client.post(f"/w/{world.workspace.pk}/ai-memory/preference/", {"remember_me": "off"}, follow=True)
    assert "AI memory is not enabled for your organization" in messages_of(response)
    world.editor.refresh_from_db()
    assert world.editor.remember_me is True


def test_ai_memory_empty_state(world):
    assert "No memories yet" in text_of(browser(world.editor).get(url(world, "ai-memory")))


def test_adding_a_memory_stores_a_manual_memory_and_shows_its_tag(world):
    client = browser(world.editor)
    assert client.get(f"/w/{world.workspace.pk}/ai-memory/add/").status_code == 200
    response = client.post(
        f"/w/{world.workspace.pk}/ai-memory/add/",
        {
            "kind": "preference",
            "topic": "communication_style",
            "summary": "Answer in Japanese",
            "details": "Short answers\n\nBullet points\n",
        },
        follow=True,
    )
    version = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE, key="communication_style")
    assert version.source == Source.MANUAL and version.kind == "preference"
    assert version.details == "Short answers\nBullet points"
    html = text_of(response)
    assert "Memory saved." in messages_of(response)
    assert "badge--manual" in html and "Manual" in html and "Answer in Japanese" in html
    assert "<li>Bullet points</li>" in html


def test_adding_masks_personal_data_and_says_so_after_saving(world):
    client = browser(world.editor)
    response = client.post(
        f"/w/{world.workspace.pk}/ai-memory/add/",
        {"kind": "fact", "topic": "contact", "summary": "Reach me at jane.doe@example.com", "details": ""},
        follow=True,
    )
    html = text_of(response)
    assert "jane.doe@example.com" not in html
    assert "[EMAIL]" in html
    assert any("masked" in m and "email address" in m for m in messages_of(response))
    assert "jane.doe" not in MemoryVersion.objects.get(member=world.editor, key="contact").text


@pytest.mark.parametrize("topic", ["Communication Style", "communicationStyle", "日本語", "_leading", ""])
def test_adding_refuses_a_topic_that_is_not_english_snake_case(world, topic):
    response = browser(world.editor).post(
        f"/w/{world.workspace.pk}/ai-memory/add/", {"kind": "fact", "topic": topic, "summary": "Something"}
    )
    assert response.status_code == 200
    assert response.context["form"].errors["topic"]
    assert not MemoryVersion.objects.filter(member=world.editor).exists()


def test_adding_only_personal_data_shows_the_actions_refusal_as_a_form_error(world):
    response = browser(world.editor).post(
        f"/w/{world.workspace.pk}/ai-memory/add/",
        {"kind": "fact", "topic": "contact", "summary": "jane.doe@example.com"},
    )
    assert response.status_code == 200
    assert "Nothing is left of the text once personal data is masked." in text_of(response)
    assert not MemoryVersion.objects.filter(member=world.editor).exists()


def test_adding_the_same_topic_updates_it_as_a_new_version(world):
    client = browser(world.editor)
    for summary in ("First", "Second"):
        client.post(
            f"/w/{world.workspace.pk}/ai-memory/add/", {"kind": "fact", "topic": "same_topic", "summary": summary}
        )
    versions = MemoryVersion.objects.filter(member=world.editor, key="same_topic").order_by("version")
    assert [v.version for v in versions] == [1, 2]
    assert versions[1].valid_to is None and versions[0].valid_to is not None


def test_editing_a_memory_saves_a_new_version_and_keeps_topic_and_source(world, planted):
    current = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE, valid_to__isnull=True)
    client = browser(world.editor)
    form = client.get(f"/w/{world.workspace.pk}/ai-memory/{current.pk}/edit/")
    assert form.status_code == 200 and EDITOR_ASSISTANT_SECRET in text_of(form)
    client.post(
        f"/w/{world.workspace.pk}/ai-memory/{current.pk}/edit/",
        {
            "kind": "instruction",
            "topic": "product_codename",
            "summary": "Codename is Borealis",
            "details": "Use in headings",
        },
    )
    latest = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE, valid_to__isnull=True)
    assert latest.version == 2 and latest.key == "product_codename"
    assert latest.source == Source.USER_REQUEST and latest.kind == "instruction"
    assert latest.text == "Codename is Borealis" and latest.details == "Use in headings"


def test_deleting_an_assistant_memory_asks_first_saying_it_cannot_be_restored(world, planted):
    memory = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE)
    client = browser(world.editor)
    confirm = client.get(f"/w/{world.workspace.pk}/ai-memory/{memory.pk}/delete/")
    assert "cannot be restored" in text_of(confirm)
    assert MemoryVersion.objects.filter(pk=memory.pk).exists()
    response = client.post(f"/w/{world.workspace.pk}/ai-memory/{memory.pk}/delete/", follow=True)
    assert "Memory deleted." in messages_of(response)
    assert not MemoryVersion.objects.filter(pk=memory.pk).exists()


@pytest.mark.parametrize("action", ["edit", "delete"])
def test_another_members_assistant_memory_cannot_be_opened_or_changed(world, planted, action):
    memory = MemoryVersion.objects.get(member=world.editor, namespace=ASSISTANT_NAMESPACE)
    client = browser(world.owner)
    assert client.get(f"/w/{world.workspace.pk}/ai-memory/{memory.pk}/{action}/").status_code == 404
    client.post(f"/w/{world.workspace.pk}/ai-memory/{memory.pk}/{action}/", {"kind": "fact", "summary": "Hijacked"})
    assert (
        MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).get().text
        == EDITOR_ASSISTANT_SECRET
    )


def test_expired_memories_are_listed_apart_and_can_be_reactivated(world):
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="old_team", summary="Used to work in Osaka", details=[]
    )
    MemoryVersion.objects.filter(pk=version.pk).update(retention_anchor=timezone.now() - timedelta(days=91))
    client = browser(world.editor)
    response = client.get(url(world, "ai-memory"))
    assert [m["topic"] for m in response.context["expired"]] == ["old_team"]
    assert response.context["memories"] == []
    assert "Reactivate" in text_of(response)
    response = client.post(f"/w/{world.workspace.pk}/ai-memory/{version.pk}/reactivate/", follow=True)
    assert "Memory reactivated." in messages_of(response)
    assert [m["topic"] for m in response.context["memories"]] == ["old_team"]
    assert response.context["expired"] == []


def test_the_refresh_button_reloads_the_list(world):
    html = text_of(browser(world.editor).get(url(world, "ai-memory")))
    assert f'href="/w/{world.workspace.pk}/ai-memory/"' in html and "Refresh" in html


@pytest.mark.parametrize(
    "source,label,css",
    [
        (Source.USER_REQUEST, "User request", "badge--user_request"),
        (Source.ASSISTANT_INITIATED, "Assistant recorded", "badge--assistant_initiated"),
        (Source.AI_EXTRACTED, "AI extracted", "badge--ai_extracted"),
        (Source.MANUAL, "Manual", "badge--manual"),
    ],
)
def test_source_tags_carry_their_text_and_colour(world, source, label, css):
    assistant.add_assistant_memory(
        world.editor, kind="fact", topic="tagged", summary="Tagged memory", details=[], source=source
    )
    html = text_of(browser(world.editor).get(url(world, "ai-memory")))
    assert re.search(rf'<span class="badge {css}">{label}</span>', html)


def test_an_agent_remember_in_the_assistant_namespace_shows_with_its_source(world):
    agent = make_agent(world.editor)
    assert (
        agent.remember(
            namespace="assistant", key="demo_product_code", text="Demo codename Aurora", source="user_request"
        ).status_code
        == 201
    )
    html = text_of(browser(world.editor, language="ja").get(url(world, "ai-memory")))
    assert "ユーザーの依頼" in html and "Demo codename Aurora" in html


def test_agent_credential_memories_are_tagged_agent(world):
    make_agent(world.editor).remember(namespace="notes", text="A plain agent note")
    assert re.search(
        r'<span class="badge badge--agent">Agent</span>',
        text_of(browser(world.editor).get(url(world, "agent-memories"))),
    )


# --- Settings → Agent access ---------------------------------------------------------------------
def test_the_credential_form_has_every_scope_unchecked_by_default(world):
    html = text_of(browser(world.editor).get(url(world, "agent-access")))
    boxes = re.findall(r'<input type="checkbox" name="scopes"[^>]*>', html)
    assert len(boxes) == 2 and not any("checked" in box for box in boxes)


def test_a_viewer_sees_the_write_scope_disabled_with_the_reason(world):
    html = text_of(browser(world.viewer).get(url(world, "agent-access")))
    write_box = re.search(r'<input type="checkbox" name="scopes" value="memory:write"[^>]*>', html).group(0)
    read_box = re.search(r'<input type="checkbox" name="scopes" value="memory:read"[^>]*>', html).group(0)
    assert "disabled" in write_box and "disabled" not in read_box
    assert "Needs the editor role or above; your role is viewer." in html


def test_creating_a_credential_shows_the_token_once(world):
    client = browser(world.editor)
    response = client.post(
        url(world, "agent-access"), {"name": "Research bot", "scopes": ["memory:read", "memory:write"]}
    )
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    token = response.context["created"]["token"]
    assert token in text_of(response)
    credential = Credential.objects.get(member=world.editor, name="Research bot")
    assert credential.scopes == ["memory:read", "memory:write"]
    assert token not in credential.token_hash
    again = text_of(client.get(url(world, "agent-access")))
    assert token not in again and "Research bot" in again
    from tests.support import AgentClient

    assert AgentClient(token).list().status_code == 200


def test_a_credential_can_be_bound_to_a_context_set_and_given_an_expiry(world):
    collection = governance_actions.create_collection(world.workspace, name="Handbook")
    context_set = governance_actions.create_context_set(
        world.workspace, name="Support", collections=[collection], documents=[]
    )
    expires_on = (timezone.now() + timedelta(days=10)).date()
    browser(world.editor).post(
        url(world, "agent-access"),
        {
            "name": "Scoped",
            "scopes": ["memory:read"],
            "context_set": context_set.pk,
            "expires_on": expires_on.isoformat(),
        },
    )
    credential = Credential.objects.get(name="Scoped")
    assert credential.context_set == context_set
    assert credential.expires_at.date() == expires_on + timedelta(days=1)


def test_a_credential_needs_a_name_and_a_scope(world):
    response = browser(world.editor).post(url(world, "agent-access"), {"name": "", "scopes": []})
    assert set(response.context["form"].errors) == {"name", "scopes"}
    assert not Credential.objects.filter(member=world.editor).exists()


def test_a_scope_above_the_role_is_refused_even_when_the_disabled_box_is_forged(world):
    response = browser(world.viewer).post(url(world, "agent-access"), {"name": "Forged", "scopes": ["memory:write"]})
    assert "A scope above your role cannot be granted." in text_of(response)
    assert not Credential.objects.filter(member=world.viewer).exists()


def test_another_workspaces_context_set_cannot_be_chosen(world):
    foreign = governance_actions.create_context_set(world.other_workspace, name="Foreign", collections=[], documents=[])
    response = browser(world.editor).post(
        url(world, "agent-access"), {"name": "X", "scopes": ["memory:read"], "context_set": foreign.pk}
    )
    assert "context_set" in response.context["form"].errors
    assert not Credential.objects.filter(name="X").exists()


def test_revoking_a_credential_stops_it(world):
    _, token = governance_actions.create_credential(world.editor, name="Old bot", scopes=["memory:read"])
    credential = Credential.objects.get(name="Old bot")
    response = browser(world.editor).post(
        f"/w/{world.workspace.pk}/settings/agent-access/{credential.pk}/revoke/", follow=True
    )
    assert any("revoked" in m for m in messages_of(response))
    credential.refresh_from_db()
    assert credential.revoked_at is not None
    from tests.support import AgentClient

    assert AgentClient(token).list().status_code == 401


def test_a_member_cannot_see_or_revoke_another_members_credentials(world):
    governance_actions.create_credential(world.owner, name="Owner private bot", scopes=["memory:read"])
    credential = Credential.objects.get(name="Owner private bot")
    client = browser(world.editor)
    assert "Owner private bot" not in text_of(client.get(url(world, "agent-access")))
    assert client.post(f"/w/{world.workspace.pk}/settings/agent-access/{credential.pk}/revoke/").status_code == 404
    credential.refresh_from_db()
    assert credential.revoked_at is None


def test_a_credential_list_shows_last_used(world):
    agent = make_agent(world.editor)
    agent.list()
    html = text_of(browser(world.editor).get(url(world, "agent-access")))
    assert "Last used" in html and "Never" not in html


# --- Settings → Ask history ----------------------------------------------------------------------
def test_owner_changes_the_settings(world):
    client = browser(world.owner)
    html = text_of(client.get(url(world, "ask-history")))
    assert "applies to existing memories at once" in html
    response = client.post(
        url(world, "ask-history"), {"agent_memory_retention_days": 30, "expired_grace_days": 0}, follow=True
    )
    assert "Settings saved." in messages_of(response)
    settings = world.workspace.ask_history
    settings.refresh_from_db()
    assert (settings.agent_memories_enabled, settings.agent_memory_retention_days, settings.expired_grace_days) == (
        False,
        30,
        0,
    )
    client.post(
        url(world, "ask-history"),
        {"agent_memories_enabled": "on", "agent_memory_retention_days": 30, "expired_grace_days": 0},
    )
    settings.refresh_from_db()
    assert settings.agent_memories_enabled is True


@pytest.mark.parametrize("days,grace", [(0, 30), (366, 30), (90, 91), (90, -1), ("x", 30)])
def test_settings_out_of_range_are_refused(world, days, grace):
    response = browser(world.owner).post(
        url(world, "ask-history"), {"agent_memory_retention_days": days, "expired_grace_days": grace}
    )
    assert response.status_code == 200 and response.context["form"].errors
    settings = world.workspace.ask_history
    settings.refresh_from_db()
    assert (settings.agent_memory_retention_days, settings.expired_grace_days) == (90, 30)


def test_owner_deletes_all_agent_memories_after_a_confirmation_that_shows_counts_only(world, planted):
    client = browser(world.owner)
    shown = client.get(f"/w/{world.workspace.pk}/settings/ask-history/delete-agent-memories/")
    confirm = text_of(shown)
    assert EDITOR_SECRET not in confirm and OWNER_SECRET not in confirm and "tone" not in confirm
    assert re.search(r"Agent memories</dt><dd class=\"num\">2<", confirm)
    token = re.search(r'name="planToken" value="([0-9a-f]{64})"', shown.content.decode()).group(1)
    response = client.post(
        f"/w/{world.workspace.pk}/settings/ask-history/delete-agent-memories/", {"planToken": token}, follow=True
    )
    assert any("2 versions erased" in m for m in messages_of(response))
    assert not MemoryVersion.objects.filter(workspace=world.workspace).exclude(namespace=ASSISTANT_NAMESPACE).exists()
    assert MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).exists()
    html = text_of(response)
    assert "Owner deleted all agent memories" in html
    receipts = DeletionReceipt.objects.filter(workspace_ref=world.workspace.pk, operation="owner_bulk_delete")
    assert receipts.exists()  # one per member whose agent memories were erased
    for receipt in receipts:
        assert f"#{receipt.pk}" in html


def test_deletion_receipts_are_those_of_this_workspace_only(world):
    make_agent(world.outsider).remember(namespace="x", key="y", text="Globex note")
    from governance.models import Member as M

    other_owner = M.objects.get(pk=world.outsider.pk)
    from memoryapp.actions import delete_all_own_agent_memories

    delete_all_own_agent_memories(other_owner)
    response = browser(world.owner).get(url(world, "ask-history"))
    assert response.context["receipts"] == []


# --- Usage ---------------------------------------------------------------------------------------
def usage(world, member, *, category="ai_memory", days_ago=0, memory_tokens=0):
    return UsageRecord.objects.create(
        workspace=world.workspace,
        member=member,
        role=member.role,
        category=category,
        model_name="offline-rules-v1",
        input_tokens=1200,
        output_tokens=300,
        memory_tokens=memory_tokens,
        input_cost=Decimal("0.012"),
        output_cost=Decimal("0.006"),
        created_at=timezone.now() - timedelta(days=days_ago),
    )


def test_usage_empty_state(world):
    response = browser(world.editor).get(url(world, "usage"))
    assert "No usage yet" in text_of(response) and "<svg" not in text_of(response)


def test_a_member_sees_own_usage_with_ai_memory_lines_and_a_chart(world):
    usage(world, world.editor, days_ago=2)
    usage(world, world.owner)
    response = browser(world.editor).get(url(world, "usage"))
    html = text_of(response)
    assert len(response.context["rows"]) == 1
    assert "AI memory (input)" in html and "AI memory (output)" in html
    assert '<svg class="chart"' in html and html.count('class="chart-bar"') == 1
    assert "owner@acme.test" not in html.replace("editor@acme.test", "")


def test_the_owner_sees_everyones_usage(world):
    usage(world, world.editor)
    usage(world, world.owner)
    response = browser(world.owner).get(url(world, "usage"))
    assert len(response.context["rows"]) == 2
    assert "editor@acme.test" in text_of(response)


def test_a_reply_with_memory_tokens_says_they_are_already_counted(world):
    usage(world, world.editor, category="reply", memory_tokens=120)
    html = text_of(browser(world.editor).get(url(world, "usage")))
    assert "This input includes about 120 tokens of AI memory, already counted in input usage" in html
    html = text_of(browser(world.editor, language="ja").get(url(world, "usage")))
    assert "この入力には AI メモリ約 120 tokens が含まれており、入力使用量に計上済みです" in html
    assert "AI メモリ" in html


def test_usage_of_another_workspace_is_not_shown(world):
    UsageRecord.objects.create(
        workspace=world.other_workspace,
        member=world.outsider,
        role="owner",
        category="ai_memory",
        model_name="m",
        input_tokens=1,
        output_tokens=1,
    )
    assert browser(world.owner).get(url(world, "usage")).context["rows"] == []


# --- nobody's page shows another member's memory text -------------------------------------------
def test_no_page_shows_another_members_memory_text(world, planted):
    usage(world, world.editor)
    pages = [*MEMBER_PAGES, "ask-history"]
    for who, foreign in (
        ("owner", [EDITOR_SECRET, EDITOR_ASSISTANT_SECRET]),
        ("viewer", [EDITOR_SECRET, EDITOR_ASSISTANT_SECRET, OWNER_SECRET]),
        ("editor", [OWNER_SECRET]),
    ):
        client = browser(getattr(world, who))
        for language in ("en", "ja"):
            client.cookies["django_language"] = language
            for page in pages:
                response = client.get(url(world, page))
                html = text_of(response)
                for secret in foreign:
                    assert secret not in html, (who, page, secret)
        extra = [
            f"/w/{world.workspace.pk}/settings/ask-history/delete-agent-memories/",
            f"/w/{world.workspace.pk}/what-bundata-remembers/delete-all/",
        ]
        for path in extra:
            html = text_of(client.get(path))
            for secret in foreign:
                assert secret not in html, (who, path, secret)


# --- translations ----------------------------------------------------------------------------------
def _po_entries(path):
    """(msgid, [msgstr…], flags) for each entry of a .po file; enough of the format for a check."""
    entries, current, field = [], None, None
    for raw in path.read_text(encoding="utf-8").splitlines() + [""]:
        line = raw.strip()
        if not line:
            if current:
                entries.append(current)
            current, field = None, None
            continue
        if line.startswith("#~"):
            continue
        current = current or {"msgid": "", "msgid_plural": "", "msgstr": {}, "flags": ""}
        if line.startswith("#,"):
            current["flags"] += line
        elif line.startswith("#"):
            continue
        elif line.startswith("msgid_plural "):
            field = "msgid_plural"
            current[field] = eval(line[len("msgid_plural ") :])  # noqa: S307 - a quoted .po string literal
        elif line.startswith("msgid "):
            field = "msgid"
            current[field] = eval(line[len("msgid ") :])  # noqa: S307
        elif line.startswith("msgstr"):
            key, _, value = line.partition(" ")
            field = ("msgstr", key)
            current["msgstr"][key] = eval(value)  # noqa: S307
        elif line.startswith('"'):
            if isinstance(field, tuple):
                current["msgstr"][field[1]] += eval(line)  # noqa: S307
            else:
                current[field] += eval(line)  # noqa: S307
    return [e for e in entries if e["msgid"]]


def test_every_string_has_a_japanese_translation_and_the_compiled_catalog_matches():
    import gettext
    from pathlib import Path

    from django.conf import settings

    directory = Path(settings.BASE_DIR) / "locale" / "ja" / "LC_MESSAGES"
    entries = _po_entries(directory / "django.po")
    assert len(entries) > 200
    untranslated = [e["msgid"] for e in entries if not all(v.strip() for v in e["msgstr"].values())]
    assert untranslated == []
    assert [e["msgid"] for e in entries if "fuzzy" in e["flags"]] == []
    with open(directory / "django.mo", "rb") as compiled:
        catalog = gettext.GNUTranslations(compiled)
    stale = []
    for entry in entries:
        if entry["msgid_plural"]:
            if catalog.ngettext(entry["msgid"], entry["msgid_plural"], 1) != entry["msgstr"]["msgstr[0]"]:
                stale.append(entry["msgid"])
        elif catalog.gettext(entry["msgid"]) != entry["msgstr"]["msgstr"]:
            stale.append(entry["msgid"])
    assert stale == [], "run: python manage.py compilemessages -l ja"
