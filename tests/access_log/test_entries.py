"""The access log (issue 17 §1, SPEC §8.1): every agent read that returns memories records one
entry, in the request, naming ids and versions and never the query or any text; the member sees
theirs (API and page), owners counts per day, the admin metadata; entries expire and are erased
with the memories they list, counted in the receipts."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.errors import ApiError
from governance import actions as g
from memoryapp import access_log, assistant, mcp
from memoryapp.models import AccessEntry, MemoryVersion, RateLimitSlot
from retention import lifecycle
from retention.models import DeletionReceipt
from tests.support import AgentClient, client_for, error_code, make_agent, on_postgres

pytestmark = pytest.mark.django_db

QUERY = "which quokka does the member prefer"


def remember(agent: AgentClient, text: str, **body) -> str:
    response = agent.remember(namespace=body.pop("namespace", "prefs"), text=text, **body)
    assert response.status_code == 201, response.content
    return response.json()["memory"]["id"]


def url(world, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"/api/w/{world.workspace.pk}/ask-history/access-log" + (f"?{query}" if query else "")


def everything_stored(entry: AccessEntry) -> str:
    return json.dumps({f.attname: str(getattr(entry, f.attname)) for f in entry._meta.concrete_fields})


# --- what is recorded ------------------------------------------------------------------------------
def test_a_recall_over_rest_records_one_entry_with_ids_and_versions_never_the_query_or_text(world, agent):
    first = remember(agent, "Likes the quokka named Kiki", key="animal")
    second = remember(agent, "Likes the quokka named Momo", key="animal")  # version 2 of the same key
    other = remember(agent, "Quokka sightings on Rottnest")
    response = agent.recall(query=QUERY, limit=5)
    assert response.status_code == 200
    returned = response.json()["memories"]
    entry = AccessEntry.objects.get()
    assert (entry.member_id, entry.workspace_id, entry.operation, entry.surface) == (
        world.editor.pk,
        world.workspace.pk,
        "recall",
        "rest",
    )
    assert entry.credential_name == "test agent" and entry.credential_ref == world.editor.credentials.get().pk
    assert entry.memories == [{"id": int(m["id"]), "v": m["version"]} for m in returned]
    assert {m["id"] for m in returned} == {second, other} and first not in entry.memory_ids
    assert entry.returned == 2 and entry.hidden == 0 and entry.erased == 0
    stored = everything_stored(entry)
    assert "quokka" not in stored.lower() and "Kiki" not in stored and "Momo" not in stored


def test_a_list_records_one_entry_and_a_read_returning_nothing_records_none(world, agent):
    remember(agent, "A note", namespace="notes")
    assert agent.list(namespace="elsewhere").json()["memories"] == []
    assert agent.recall(query="a note", namespace="elsewhere").json()["memories"] == []
    assert AccessEntry.objects.count() == 0
    agent.list()
    entry = AccessEntry.objects.get()
    assert entry.operation == "list" and entry.returned == 1


def test_a_refused_read_records_nothing(world):
    writer = make_agent(world.editor, scopes=["memory:write"])
    remember(writer, "A note")
    assert error_code(writer.list()) == "INSUFFICIENT_SCOPE"
    g.set_remember_me(world.editor, False)
    assert error_code(make_agent(world.editor).list()) == "AGENT_MEMORY_DISABLED"
    assert AccessEntry.objects.count() == 0


def test_a_read_over_mcp_is_recorded_with_its_surface(world, agent):
    remember(agent, "Prefers window seats")
    result = mcp.run_operation(agent.token, "recall", {"query": "window seats"})
    assert not result.is_error
    result = mcp.run_operation(agent.token, "list", {})
    assert not result.is_error
    assert list(AccessEntry.objects.order_by("id").values_list("operation", "surface")) == [
        ("recall", "mcp"),
        ("list", "mcp"),
    ]


def test_the_entry_is_one_insert_inside_the_request(world, agent):
    remember(agent, "Prefers window seats")
    with CaptureQueriesContext(connection) as queries:
        assert agent.recall(query="window seats").status_code == 200
    # On PostgreSQL the entry's INSERT follows a WITH (it lists only versions still stored, access_log.record).
    inserts = [q["sql"] for q in queries.captured_queries if " INSERT INTO " in f" {q['sql'].lstrip().upper()}"]
    # The database limiter (no Redis) also inserts the read budget's slot (SPEC §4.7): a row of its own.
    slots = [sql for sql in inserts if RateLimitSlot._meta.db_table in sql]
    assert len(slots) == (1 if settings.RATE_LIMIT_BACKEND == "database" else 0)
    entries = [sql for sql in inserts if sql not in slots]
    assert len(entries) == 1 and f"INSERT INTO {AccessEntry._meta.db_table}" in entries[0].replace('"', "")


def test_the_hidden_count_is_recorded(world, agent):
    collection = g.create_collection(world.workspace, name="Docs")
    passage = g.create_document(collection, title="d", text="Paragraph about ferries.").current_version.passages.get()
    remember(agent, "Cites the ferry paragraph", citations=[str(passage.pk)])
    remember(agent, "Plain ferry note")
    collection.restricted = True
    collection.save()  # now unreadable by the member: the citing memory is hidden
    body = agent.list().json()
    assert body["hidden"] == 1
    assert AccessEntry.objects.get().hidden == 1


# --- who sees what ---------------------------------------------------------------------------------
def test_the_member_sees_their_entries_with_filters_and_a_signed_cursor(world, agent):
    remember(agent, "Prefers tea")
    second = make_agent(world.editor)
    for _ in range(3):
        agent.recall(query="tea")
    second.list()
    member = client_for(world.editor)
    body = member.get(url(world)).json()
    assert body["scope"] == "member" and len(body["entries"]) == 4 and body["nextCursor"] is None
    entry = body["entries"][0]
    assert (
        entry["operation"] == "list"
        and entry["credential"]["name"] == "test agent"
        and entry["memories"][0]["state"] == "readable"
    )
    assert set(entry) == {
        "id",
        "at",
        "credential",
        "operation",
        "surface",
        "returned",
        "hidden",
        "erasedSince",
        "memories",
    }
    by_credential = member.get(url(world, credential=entry["credential"]["id"])).json()["entries"]
    assert [e["id"] for e in by_credential] == [entry["id"]]
    assert len(member.get(url(world, operation="recall")).json()["entries"]) == 3
    today = timezone.now().date()
    assert len(member.get(url(world, **{"from": today.isoformat(), "to": today.isoformat()})).json()["entries"]) == 4
    assert member.get(url(world, to=(today - timedelta(days=1)).isoformat())).json()["entries"] == []
    page = member.get(url(world, limit=3)).json()
    rest = member.get(url(world, limit=3, cursor=page["nextCursor"])).json()
    assert len(page["entries"]) == 3 and len(rest["entries"]) == 1 and rest["nextCursor"] is None
    assert {e["id"] for e in page["entries"] + rest["entries"]} == {e["id"] for e in body["entries"]}
    # a cursor is good only for the member it was issued to
    assert error_code(client_for(world.owner).get(url(world, limit=3, cursor=page["nextCursor"]))) == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    "params",
    [
        {"operation": "forget"},
        {"from": "yesterday"},
        {"to": "2026-13-01"},
        {"from": "2026-02-02", "to": "2026-02-01"},
        {"credential": "x"},
        {"limit": "0"},
        {"scope": "all"},
        {"cursor": "garbage"},
    ],
)
def test_bad_filters_are_refused_with_a_validation_error(world, params):
    response = client_for(world.editor).get(url(world, **params))
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"


def test_no_other_member_and_no_outsider_sees_a_members_entries(world, agent):
    remember(agent, "Editor's private note")
    agent.recall(query="private note")
    for member in (world.owner, world.viewer):
        assert client_for(member).get(url(world)).json()["entries"] == []
    assert client_for(world.outsider).get(url(world)).status_code == 404
    assert Client().get(url(world)).status_code in (401, 403)


def test_owners_see_counts_per_day_only(world, agent):
    remember(agent, "Editor's private note", namespace="private-ns")
    agent.recall(query="private note")
    agent.list()
    make_agent(world.owner).list()  # returns nothing: not logged
    response = client_for(world.owner).get(url(world, scope="workspace"))
    assert response.status_code == 200
    body = response.json()
    assert body["scope"] == "workspace"
    (day,) = body["days"]
    assert day == {
        "date": timezone.now().date().isoformat(),
        "reads": 2,
        "memoriesReturned": 2,
        "byOperation": {"list": 1, "recall": 1},
        "bySurface": {"rest": 2},
    }
    # the day above is the whole answer about the member's reads: no id, name or memory in it
    assert set(body) == {"scope", "retentionDays", "from", "to", "days"}
    assert "test agent" not in response.content.decode() and "private" not in response.content.decode()
    recalls = client_for(world.owner).get(url(world, scope="workspace", operation="recall")).json()["days"]
    assert recalls[0]["reads"] == 1


def test_the_workspace_scope_needs_the_manage_permission_and_takes_no_credential(world):
    assert client_for(world.editor).get(url(world, scope="workspace")).status_code == 403
    assert error_code(client_for(world.owner).get(url(world, scope="workspace", credential="1"))) == "VALIDATION_ERROR"
    assert (
        error_code(
            client_for(world.owner).get(url(world, scope="workspace", **{"from": "2020-01-01", "to": "2026-01-01"}))
        )
        == "VALIDATION_ERROR"
    )


def test_the_workspace_scope_refuses_in_this_order_with_these_answers(world):
    """Bad parameters, then the permission (403 naming it), then a member-only filter (the one
    named: credential before cursor), then a window over 366 days."""
    forbidden = client_for(world.editor).get(
        url(world, scope="workspace", cursor="x", **{"from": "2020-01-01", "to": "2026-01-01"})
    )
    assert forbidden.status_code == 403
    assert forbidden.json() == {
        "error": {
            "code": "FORBIDDEN",
            "message": "This needs the ask_history:manage permission.",
            "details": {"permission": "ask_history:manage"},
        }
    }
    assert (
        error_code(client_for(world.editor).get(url(world, scope="workspace", operation="forget")))
        == "VALIDATION_ERROR"
    )
    owner = client_for(world.owner)
    only_counts = ["Not available with scope=workspace: it answers counts per day only."]
    for params, field in (
        ({"credential": "1", "cursor": "x"}, "credential"),
        ({"cursor": "x"}, "cursor"),
        ({"credential": "", "cursor": "x"}, "cursor"),
    ):
        response = owner.get(url(world, scope="workspace", **params, **{"from": "2020-01-01", "to": "2026-01-01"}))
        assert response.status_code == 400 and response.json()["error"]["details"] == {
            "fields": {field: only_counts}
        }, params
    too_long = owner.get(url(world, scope="workspace", **{"from": "2025-01-01", "to": "2026-01-02"}))
    assert too_long.status_code == 400 and too_long.json()["error"]["details"] == {
        "fields": {"from": ["At most 366 days at once."]}
    }
    longest = owner.get(url(world, scope="workspace", **{"from": "2025-01-01", "to": "2026-01-01"})).json()
    assert (longest["from"], longest["to"]) == ("2025-01-01", "2026-01-01")


@time_machine.travel(datetime(2026, 3, 2, 23, 30, tzinfo=UTC), tick=False)
def test_the_workspace_scope_answers_the_30_utc_days_to_today_unless_told(world, settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # already 3 March there: the window is still the UTC days
    owner = client_for(world.owner)
    window = owner.get(url(world, scope="workspace")).json()
    assert (window["from"], window["to"], window["retentionDays"]) == (
        "2026-02-01",
        "2026-03-02",
        settings.ACCESS_LOG_RETENTION_DAYS,
    )
    until = owner.get(url(world, scope="workspace", to="2026-01-31")).json()
    assert (until["from"], until["to"]) == ("2026-01-02", "2026-01-31")
    since = owner.get(url(world, scope="workspace", **{"from": "2026-02-20"})).json()
    assert (since["from"], since["to"]) == ("2026-02-20", "2026-03-02")


@time_machine.travel(datetime(2026, 3, 2, 23, 30, tzinfo=UTC), tick=False)
def test_daily_counts_for_holds_the_owners_rule_and_the_window(world, agent):
    remember(agent, "Editor's private note")
    agent.recall(query="private note")
    counts = access_log.daily_counts_for(world.owner)
    assert (counts["scope"], counts["from"], counts["to"]) == ("workspace", "2026-02-01", "2026-03-02")
    assert [(d["date"], d["reads"], d["byOperation"]) for d in counts["days"]] == [("2026-03-02", 1, {"recall": 1})]
    assert access_log.daily_counts_for(world.owner, operation="list")["days"] == []
    assert access_log.daily_counts_for(world.owner, until=date(2026, 3, 1))["days"] == []
    widest = access_log.daily_counts_for(world.owner, since=date(2025, 3, 2), until=date(2026, 3, 2))
    assert (
        (widest["from"], len(widest["days"])) == ("2025-03-02", 1)
        and access_log.MAX_DAYS == 366
        and access_log.DEFAULT_DAYS == 30
    )
    with pytest.raises(ApiError) as refused:
        access_log.daily_counts_for(world.owner, since=date(2025, 3, 1), until=date(2026, 3, 2))
    assert (refused.value.status, refused.value.details) == (400, {"fields": {"from": ["At most 366 days at once."]}})
    for member in (world.editor, world.viewer):
        with pytest.raises(ApiError) as forbidden:
            access_log.daily_counts_for(member, member_only=["cursor"])
        assert (forbidden.value.status, forbidden.value.code, forbidden.value.details) == (
            403,
            "FORBIDDEN",
            {"permission": "ask_history:manage"},
        )
    with pytest.raises(ApiError) as member_only:
        access_log.daily_counts_for(world.owner, since=date(2020, 1, 1), member_only=["credential", "cursor"])
    assert member_only.value.details == {
        "fields": {"credential": ["Not available with scope=workspace: it answers counts per day only."]}
    }


# --- erased with the memories ----------------------------------------------------------------------
def test_forgetting_one_of_several_listed_memories_strikes_it_from_the_entry(world, agent):
    keep = remember(agent, "Prefers tea", key="drink")
    gone = remember(agent, "Likes jazz", key="music")
    agent.list()
    response = agent.forget(memoryId=gone)
    receipt = DeletionReceipt.objects.get(pk=response.json()["receiptId"])
    entry = AccessEntry.objects.get()
    assert entry.memory_ids == [int(keep)] and entry.returned == 2 and entry.erased == 1
    assert (
        receipt.manifest["artifacts"]["access_log_entry"] == 0
        and receipt.manifest["artifacts"]["access_log_reference"] == 1
    )
    assert receipt.verification["remaining"]["access_log_entry"] == 0 and receipt.verification["clean"] is True
    listed = client_for(world.editor).get(url(world)).json()["entries"][0]
    assert listed["erasedSince"] == 1 and [m["id"] for m in listed["memories"]] == [keep]
    # the last memory an entry lists goes: the entry goes with it
    receipt = DeletionReceipt.objects.get(pk=agent.forget(memoryId=keep).json()["receiptId"])
    assert AccessEntry.objects.count() == 0 and receipt.manifest["artifacts"]["access_log_entry"] == 1


def test_a_preview_counts_exactly_what_the_erase_then_strikes(world, agent):
    from memoryapp import access_log

    ids = [int(remember(agent, f"Note {i}", key=f"k{i}")) for i in range(3)]
    agent.list()  # all three
    agent.list(limit=1)  # the newest only
    preview = access_log.strike_counts(ids[1:], member_id=world.editor.pk)
    assert AccessEntry.objects.count() == 2  # nothing written
    receipt = DeletionReceipt.objects.get(
        pk=client_for(world.editor)
        .delete(f"/api/w/{world.workspace.pk}/ask-history/agent-memories/{ids[2]}")
        .json()["receiptId"]
    )
    struck = receipt.manifest["artifacts"]
    receipt = DeletionReceipt.objects.get(
        pk=client_for(world.editor)
        .delete(f"/api/w/{world.workspace.pk}/ask-history/agent-memories/{ids[1]}")
        .json()["receiptId"]
    )
    assert preview == {"access_log_entry": 1, "access_log_reference": 2}
    assert struck["access_log_entry"] + receipt.manifest["artifacts"]["access_log_entry"] == 1
    assert struck["access_log_reference"] + receipt.manifest["artifacts"]["access_log_reference"] == 2


def test_an_entry_listing_a_superseded_version_goes_when_the_key_is_forgotten(world, agent):
    remember(agent, "Old tea note", key="drink")
    agent.list()  # lists version 1
    remember(agent, "New tea note", key="drink")
    agent.forget(namespace="prefs", key="drink")
    assert AccessEntry.objects.count() == 0


def test_the_members_delete_all_erases_entries_of_agent_memories_and_keeps_assistant_references(world, agent):
    remember(agent, "An agent note")
    version, _ = assistant.add_assistant_memory(world.editor, kind="fact", topic="drink", summary="Prefers tea")
    agent.list()  # both the agent note and the assistant memory
    agent.list(namespace="prefs")  # the agent note only
    result = client_for(world.editor).delete(f"/api/w/{world.workspace.pk}/ask-history/agent-memories").json()
    receipt = DeletionReceipt.objects.get(pk=result["receiptId"])
    assert (
        receipt.manifest["artifacts"]["access_log_entry"] == 1
        and receipt.manifest["artifacts"]["access_log_reference"] == 1
    )
    (entry,) = AccessEntry.objects.all()
    assert entry.memory_ids == [version.pk] and entry.erased == 1


def test_the_owners_bulk_delete_counts_access_entries_in_each_members_receipt(world, agent):
    remember(agent, "Editor note")
    owner_agent = make_agent(world.owner)
    remember(owner_agent, "Owner note")
    agent.list()
    owner_agent.list()
    result = client_for(world.owner).delete(f"/api/w/{world.workspace.pk}/ask-history/settings/agent-memories").json()
    assert result["deleted"]["access_log_entry"] == 2
    for receipt in DeletionReceipt.objects.filter(pk__in=result["receiptIds"]):
        assert receipt.manifest["artifacts"]["access_log_entry"] == 1
    assert AccessEntry.objects.count() == 0


def test_removing_a_member_erases_their_entries(world, agent, django_capture_on_commit_callbacks):
    remember(agent, "Editor note")
    agent.list()
    viewer_agent = make_agent(world.owner)
    remember(viewer_agent, "Owner note")
    viewer_agent.list()
    with django_capture_on_commit_callbacks(execute=True):
        g.remove_member(world.editor, actor=world.owner.user)
    assert list(AccessEntry.objects.values_list("member_id", flat=True)) == [world.owner.pk]
    receipt = DeletionReceipt.objects.get(operation="member_removal")
    assert receipt.manifest["artifacts"]["access_log_entry"] == 1


def test_an_entry_written_by_a_read_racing_the_member_removal_is_swept(world, agent):
    remember(agent, "Editor note")
    agent.list()
    g.remove_member(world.editor, actor=world.owner.user)  # no on-commit erase ran (as if it raced)
    assert lifecycle.access_log_sweep()["accessEntriesOfRemovedMembers"] == 1
    assert AccessEntry.objects.count() == 0


def test_deleting_the_workspace_erases_its_entries(world, agent):
    remember(agent, "Editor note")
    agent.list()
    g.delete_workspace(world.workspace, actor=None)
    assert AccessEntry.objects.count() == 0
    assert DeletionReceipt.objects.get(operation="workspace_deletion").manifest["artifacts"]["access_log_entry"] == 1


def test_expiry_erases_listed_memories_and_the_entries_with_them(world, agent):
    remember(agent, "Will expire")
    agent.list()
    MemoryVersion.objects.update(
        retention_anchor=timezone.now() - timedelta(days=91), created_at=timezone.now() - timedelta(days=91)
    )
    lifecycle.expiry_sweep()
    assert AccessEntry.objects.count() == 0
    assert DeletionReceipt.objects.get(operation="expiry").manifest["artifacts"]["access_log_entry"] == 1


# --- retention of the entries themselves ---------------------------------------------------------
def test_entries_expire_after_the_retention_setting_hidden_at_once_and_swept(world, agent, settings):
    remember(agent, "A note")
    agent.list()
    agent.list()
    old = AccessEntry.objects.order_by("id").first()
    AccessEntry.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=91))
    entries = client_for(world.editor).get(url(world)).json()["entries"]
    assert [e["id"] for e in entries] != [] and str(old.pk) not in {e["id"] for e in entries}  # read paths stop at once
    assert lifecycle.access_log_sweep() == {"accessEntriesExpired": 1, "accessEntriesOfRemovedMembers": 0}
    assert AccessEntry.objects.count() == 1
    settings.ACCESS_LOG_RETENTION_DAYS = 1
    AccessEntry.objects.update(at=timezone.now() - timedelta(days=2))
    assert lifecycle.access_log_sweep()["accessEntriesExpired"] == 1
    assert lifecycle.access_log_sweep()["accessEntriesExpired"] == 0  # idempotent


def test_the_sweep_is_a_registered_periodic_job_on_the_beat_schedule(settings):
    from retention.jobs import JOBS

    assert JOBS["access_log_sweep"] is lifecycle.access_log_sweep
    entry = settings.CELERY_BEAT_SCHEDULE["access-log-sweep"]
    assert entry["task"] == "retention.tasks.access_log_sweep" and entry["options"]["expires"]


def test_the_retention_setting_refuses_a_bad_value(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from core.env import env_int

    monkeypatch.setenv("ACCESS_LOG_RETENTION_DAYS", "0")
    with pytest.raises(ImproperlyConfigured):
        env_int("ACCESS_LOG_RETENTION_DAYS", 90, minimum=1, maximum=3650)


# --- the page -------------------------------------------------------------------------------------
def page_of(member, language: str = "en") -> str:
    browser = Client()
    browser.force_login(member.user)
    browser.cookies["django_language"] = language
    response = browser.get(f"/w/{member.workspace_id}/what-bundata-remembers/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_shows_each_access_expandable_to_the_memories_returned(world):
    _, token = g.create_credential(world.editor, name="claude-desktop", scopes=["memory:read", "memory:write"])
    agent = AgentClient(token)
    remember(agent, "Prefers green tea", key="drink")
    gone = remember(agent, "Likes jazz", key="music")
    remember(agent, "Visits Osaka monthly", key="travel")
    agent.recall(query="green tea jazz osaka", limit=3)
    agent.forget(memoryId=gone)
    html = page_of(world.editor)
    assert "Access history" in html
    assert "<em>claude-desktop</em> recalled 3 memories" in html
    section = html[html.index('id="access-history"') :]
    assert "<details>" in section and "Prefers green tea" in section and "Visits Osaka monthly" in section
    assert "Likes jazz" not in html and "1 memory it received has been erased since." in section
    japanese = page_of(world.editor, "ja")
    assert "アクセス履歴" in japanese and "<em>claude-desktop</em> が 3 件のメモリを想起しました" in japanese


def test_the_page_shows_a_memory_erased_after_its_entry_was_written_as_erased(world, agent):
    memory_id = remember(agent, "Racing note")
    agent.list()
    MemoryVersion.objects.filter(pk=memory_id).delete()  # as if erased between the read and its entry
    html = page_of(world.editor)
    assert "Racing note" not in html and "Erased memory (version 1)" in html


def test_an_expired_or_pending_memory_is_not_opened_from_the_history(world, agent):
    remember(agent, "Expired but not swept yet")
    agent.list()
    MemoryVersion.objects.update(retention_anchor=timezone.now() - timedelta(days=91))
    assert "Expired but not swept yet" not in page_of(world.editor)


def test_a_credential_name_is_escaped_on_the_page(world):
    _, token = g.create_credential(
        world.editor, name="<script>alert(1)</script>", scopes=["memory:read", "memory:write"]
    )
    agent = AgentClient(token)
    remember(agent, "A note")
    agent.list()
    for language in ("en", "ja"):
        html = page_of(world.editor, language)
        assert "<script>alert(1)</script>" not in html and "<em>&lt;script&gt;alert(1)&lt;/script&gt;</em>" in html


def test_the_lifecycle_endpoint_counts_access_entries(world, agent):
    remember(agent, "A note")
    agent.list()
    lifecycle_url = f"/api/w/{world.workspace.pk}/ask-history/lifecycle"
    assert client_for(world.owner).get(lifecycle_url).json()["counts"]["accessLogEntries"] == 1
    assert client_for(world.editor).get(lifecycle_url).json()["counts"]["accessLogEntries"] == 1
    assert client_for(world.viewer).get(lifecycle_url).json()["counts"]["accessLogEntries"] == 0
    assert "access_log_entry" in {a["key"] for a in client_for(world.viewer).get(lifecycle_url).json()["artifacts"]}


def test_nobody_else_sees_the_members_history_on_their_page(world, agent):
    remember(agent, "Editor private page note")
    agent.list()
    assert "Editor private page note" in page_of(world.editor)
    for member in (world.owner, world.viewer):
        assert "Editor private page note" not in page_of(member) and "test agent" not in page_of(member)


# --- the admin ------------------------------------------------------------------------------------
@pytest.fixture
def admin_client(db):
    user = get_user_model().objects.create_user(
        "root@x.test", "root@x.test", "pw-root-123", is_staff=True, is_superuser=True
    )
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_shows_credential_ids_and_counts_never_the_name_or_a_lookup_on_it(world, admin_client):
    _, token = g.create_credential(world.editor, name="secret-bot-name", scopes=["memory:read", "memory:write"])
    agent = AgentClient(token)
    remember(agent, "Admin must not read this")
    agent.list()
    entry = AccessEntry.objects.get()
    listing = admin_client.get("/admin/memoryapp/accessentry/")
    assert listing.status_code == 200
    detail = admin_client.get(f"/admin/memoryapp/accessentry/{entry.pk}/change/")
    assert detail.status_code == 200
    for response in (listing, detail):
        text = response.content.decode()
        assert "secret-bot-name" not in text and "Admin must not read this" not in text
    assert str(entry.credential_ref) in detail.content.decode()
    for lookup in ("credential_name", "credential_name__startswith", "credential_name__icontains"):
        assert admin_client.get(f"/admin/memoryapp/accessentry/?{lookup}=secret").status_code == 400
    csv = b"".join(admin_client.get("/admin/memoryapp/accessentry/export.csv").streaming_content).decode()
    assert "secret-bot-name" not in csv and str(entry.credential_ref) in csv


# --- concurrency ------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL")
def test_concurrent_forgets_of_memories_listed_in_the_same_entries_lose_no_strike(world):
    from concurrent.futures import ThreadPoolExecutor

    agent = make_agent(world.editor)
    ids = [remember(agent, f"Note {i}", key=f"k{i}") for i in range(10)]
    for _ in range(5):
        agent.list()  # five entries, each listing all ten

    def forget(memory_id: str) -> int:
        try:
            return agent.forget(memoryId=memory_id).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(forget, ids[:8]))
    assert statuses == [200] * 8
    entries = list(AccessEntry.objects.all())
    assert len(entries) == 5 and all(
        sorted(e.memory_ids) == sorted(int(i) for i in ids[8:]) and e.erased == 8 for e in entries
    )
    receipts = DeletionReceipt.objects.filter(operation="forget")
    assert sum(r.manifest["artifacts"]["access_log_reference"] for r in receipts) == 40
