"""Memory content stays closed: no admin page, export, history, search or filter reveals memory
text or details; the "view content" step is off by default and audited when on."""

from __future__ import annotations

import pytest
from django.test import override_settings

from credits.models import Consolidation
from governance.models import AuditEvent, Member
from memoryapp.models import MemoryVersion
from tests.admin.support import (
    CANARY_TEXT,
    CONVERSATION_WORD,
    admin_url,
    assert_no_content,
    browser,
    product_admins,
)

pytestmark = pytest.mark.django_db


def body_of(response) -> str:
    if hasattr(response, "streaming_content"):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def test_no_change_list_change_page_history_or_delete_page_shows_memory_content(everything, memories, staff):
    for _, user in staff.all():
        client = browser(user)
        assert_no_content(body_of(client.get("/admin/")), memories)
        for model, _ in product_admins():
            for obj in model._default_manager.all()[:5]:
                for view in ("change", "history", "delete"):
                    response = client.get(admin_url(model, view, obj.pk))
                    body = body_of(response)
                    assert_no_content(body, memories)
                    assert CONVERSATION_WORD not in body
            page = body_of(client.get(admin_url(model, "changelist")))
            assert_no_content(page, memories)
            assert CONVERSATION_WORD not in page


def test_memory_version_pages_show_metadata_instead(memories, staff):
    version = memories.agent_version
    page = body_of(browser(staff.superuser).get(admin_url(MemoryVersion, "change", version.pk)))
    assert version.text_hmac in page and str(version.text_length) in page and "umbrella" in page
    assert "passage 1" in page  # citations as ids and hashes


def test_memory_versions_can_be_neither_edited_nor_deleted_even_by_a_superuser(memories, staff):
    client = browser(staff.superuser)
    version = memories.agent_version
    assert client.post(admin_url(MemoryVersion, "change", version.pk), {"text": "rewritten"}).status_code == 403
    delete = client.get(admin_url(MemoryVersion, "delete", version.pk))
    assert delete.status_code == 403
    assert_no_content(body_of(delete), memories)
    assert client.post(admin_url(MemoryVersion, "delete", version.pk), {"post": "yes"}).status_code == 403
    version.refresh_from_db()
    assert version.text == memories.agent_version.text


def test_every_csv_export_is_free_of_content_and_the_memory_export_carries_metadata(everything, memories, staff):
    client = browser(staff.auditor)
    exported = 0
    for model, model_admin in product_admins():
        if not model_admin.csv_columns:
            continue
        response = client.get(admin_url(model, "export_csv"))
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
        body = body_of(response)
        assert_no_content(body, memories)
        exported += 1
    assert exported >= 4
    csv = body_of(client.get(admin_url(MemoryVersion, "export_csv")))
    header = csv.splitlines()[0].split(",")
    assert {"id", "namespace", "key", "text_length", "text_hmac", "created_at", "state"} <= set(header)
    assert "text" not in header and "details" not in header
    assert memories.agent_version.text_hmac in csv


def test_the_export_follows_the_filters_of_the_change_list(world, memories, staff):
    client = browser(staff.auditor)
    changelist = body_of(client.get(admin_url(MemoryVersion, "changelist") + "?surface=assistant"))
    assert "export.csv?surface=assistant" in changelist
    csv = body_of(client.get(admin_url(MemoryVersion, "export_csv") + "?surface=assistant"))
    rows = csv.strip().splitlines()[1:]
    assert len(rows) == 1 and rows[0].startswith(f"{memories.assistant_version.pk},")


@pytest.mark.parametrize(
    "lookup", ["text__icontains", "details__icontains", "text", "text__startswith", "citations__memory__text__contains"]
)
def test_lookups_on_memory_content_are_refused(memories, staff, lookup):
    client = browser(staff.superuser)
    response = client.get(admin_url(MemoryVersion, "changelist") + f"?{lookup}=zebrafinch")
    assert response.status_code in (400, 302)
    assert_no_content(body_of(response), memories)


def test_lookups_through_relations_into_memory_content_are_refused(memories, staff):
    client = browser(staff.superuser)
    for url in (
        admin_url(Member, "changelist") + "?memory_versions__text__icontains=zebrafinch",
        admin_url(MemoryVersion, "changelist").replace("memoryversion", "citation")
        + "?memory__text__icontains=zebrafinch",
        admin_url(Consolidation, "changelist") + f"?messages__icontains={CONVERSATION_WORD}",
    ):
        response = client.get(url)
        assert response.status_code in (400, 302), url


def test_searching_by_memory_text_finds_nothing(memories, staff):
    client = browser(staff.superuser)

    def found(term: str) -> set[int]:
        page = body_of(client.get(admin_url(MemoryVersion, "changelist"), {"q": term}))
        return {
            v.pk
            for v in (memories.agent_version, memories.assistant_version)
            if admin_url(MemoryVersion, "change", v.pk) in page
        }

    for term in ("zebrafinch", CANARY_TEXT, "periwinkle umbrellas", memories.assistant_version.details):
        assert found(term) == set()
    assert found("umbrella") == {memories.agent_version.pk}
    assert memories.assistant_version.pk in found(str(memories.assistant_version.pk))


def test_no_search_field_of_any_admin_reaches_content():
    from governance.content import lookup_reaches_content

    for model, model_admin in product_admins():
        for name in model_admin.search_fields:
            assert not lookup_reaches_content(model, name.lstrip("^=@#")), (model, name)
        for name in model_admin.list_display:
            assert name not in ("text", "details", "messages"), (model, name)


# --- the audited "view content" step ----------------------------------------------------------
def test_view_content_is_off_by_default_even_for_superusers(memories, staff):
    url = f"/admin/memoryapp/memoryversion/{memories.agent_version.pk}/content/"
    for _, user in staff.all():
        client = browser(user)
        assert client.get(url).status_code == 403
        response = client.post(url, {"reason": "curious"})
        assert response.status_code == 403
        assert_no_content(body_of(response), memories)
    page = body_of(browser(staff.superuser).get(admin_url(MemoryVersion, "change", memories.agent_version.pk)))
    assert "/content/" not in page
    assert not AuditEvent.objects.filter(action="memory.content_viewed").exists()


@override_settings(ADMIN_MAY_VIEW_MEMORY_CONTENT=True)
def test_when_allowed_only_superusers_view_content_after_giving_a_reason_and_it_is_audited(memories, staff):
    version = memories.assistant_version
    url = f"/admin/memoryapp/memoryversion/{version.pk}/content/"
    for user in (staff.auditor, staff.operator):
        assert browser(user).post(url, {"reason": "curious"}).status_code == 403
    client = browser(staff.superuser)
    assert "/content/" in body_of(client.get(admin_url(MemoryVersion, "change", version.pk)))

    ask = client.get(url)
    assert ask.status_code == 200 and 'name="reason"' in body_of(ask)
    assert_no_content(body_of(ask), memories)
    assert_no_content(body_of(client.post(url, {"reason": ""})), memories)
    assert not AuditEvent.objects.filter(action="memory.content_viewed").exists()

    shown = client.post(url, {"reason": "support ticket 1234"})
    assert shown.status_code == 200 and "no-store" in shown["Cache-Control"]
    assert version.text in body_of(shown) and "marmalade" in body_of(shown)
    event = AuditEvent.objects.get(action="memory.content_viewed")
    assert (event.actor, event.reason, event.target, event.workspace_id) == (
        staff.superuser,
        "support ticket 1234",
        f"memory version #{version.pk}",
        version.workspace_id,
    )
    assert "zebrafinch" not in str(event.changes)
    # the audit log itself never carries the content
    assert_no_content(body_of(client.get(admin_url(AuditEvent, "changelist"))), memories)
