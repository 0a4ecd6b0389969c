"""Credentials end with the membership they were issued in (issue 22 row 3, SPEC §10).

The attack: a member is removed (their token answers 401), then re-added — `addmember` reused the
member row and cleared `left_at`, so the old agent token worked again (list 200, remember 201):
`revokedAt` had never been set. Now removal revokes every credential of the membership in its own
transaction, a re-added member starts a new membership period, and nothing issued before that
period began — an agent credential, a personal token or a browser session — opens the
workspace again: every agent route (REST and MCP), every workspace API route and every page is
tried with each of them. A deleted user's memberships end the same way. Generated sequences of
add / remove / re-add / role change / issue never revive an older credential.
"""

from __future__ import annotations

import io
import itertools
import json
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from rest_framework.test import APIClient

from governance import actions
from governance.auth import SESSION_AUTHENTICATED_AT
from governance.models import AuditEvent, Credential, Member
from memoryapp import mcp
from memoryapp.models import MemoryVersion
from retention.models import DeletionReceipt
from tests.support import AgentClient, client_for, error_code, fill, routes

pytestmark = pytest.mark.django_db
User = get_user_model()

AGENT_BODIES = {
    "memories/remember": {"namespace": "prefs", "key": "k", "text": "Prefers tea"},
    "memories/recall": {"query": "tea"},
    "memories/list": {},
    "memories/forget": {"namespace": "prefs", "key": "k"},
    "conversations/turns": {
        "agentId": "1",
        "conversationId": "c-1",
        "messages": [{"role": "user", "content": "hello"}],
    },
    "usage/replies": {"conversationId": "c-1", "model": "m", "inputTokens": 1, "outputTokens": 1, "memoryTokens": 0},
}


def agent_token(member: Member, scopes=("memory:read", "memory:write"), name="bot") -> str:
    _, token = actions.create_credential(member, name=name, scopes=list(scopes))
    return token


def session_for(user) -> Client:
    client = Client()
    client.force_login(user)  # goes through django.contrib.auth.login, like the login page
    return client


def re_add(member: Member, role: str = "editor") -> Member:
    """The issue's reproduction: the owner removes the member over the API, then `addmember`."""
    owner = Member.objects.filter(workspace=member.workspace, role="owner", left_at__isnull=True).first()
    response = client_for(owner).delete(f"/api/w/{member.workspace_id}/members/{member.pk}")
    assert response.status_code in (200, 204), response.content
    call_command(
        "addmember", str(member.workspace_id), member.user.email, "--role", role, "--json", stdout=io.StringIO()
    )
    return Member.objects.get(pk=member.pk)


def agent_answers(token: str) -> dict[str, int]:
    client = APIClient()
    return {
        path: client.post(
            f"/api/agent/v1/{path}", body, format="json", HTTP_AUTHORIZATION=f"Bearer {token}"
        ).status_code
        for path, body in AGENT_BODIES.items()
    }


def mcp_codes(token: str) -> dict[str, str | None]:
    bodies = {
        "remember": AGENT_BODIES["memories/remember"],
        "recall": {"query": "tea"},
        "list": {},
        "forget": {"namespace": "prefs", "key": "k"},
    }
    codes = {}
    for operation, body in bodies.items():
        result = mcp.run_operation(token, operation, body)
        codes[operation] = result.structured_content["error"]["code"] if result.is_error else None
    return codes


def workspace_paths(workspace_id: int, prefix: str, ids: dict[str, str]) -> list[str]:
    values = {"ws_id": str(workspace_id), **ids}
    return [
        fill(route, values) for route, names in routes() if route.startswith(prefix) and all(n in values for n in names)
    ]


def path_ids(member: Member) -> dict[str, str]:
    """A value for every path parameter of the workspace routes (ids that need not exist: the
    membership is judged before any object is looked up)."""
    return {
        name: "1"
        for name in ("memory_id", "credential_id", "collection_id", "document_id", "passage_id", "set_id", "agent_id")
    } | {"member_id": str(member.pk), "role": "editor"}


def api_statuses(client, paths, **headers) -> dict[str, int]:
    answers = {}
    for path in paths:
        response = client.get(path, **headers)
        if response.status_code == 405:
            response = client.post(path, {}, format="json", **headers)
        answers[path] = response.status_code
    return answers


# --- removal revokes, in the removal's transaction ----------------------------------------------------
def test_removing_a_member_revokes_every_credential_of_the_membership_with_an_audit_event_each(world):
    tokens = [agent_token(world.editor, name=f"bot-{n}") for n in range(3)]
    earlier = Credential.objects.filter(member=world.editor).order_by("id").first()
    actions.revoke_credential(earlier, actor=world.editor.user)
    earlier.refresh_from_db()
    actions.remove_member(world.editor, actor=world.owner.user)
    world.editor.refresh_from_db()
    credentials = list(Credential.objects.filter(member=world.editor).order_by("id"))
    assert len(credentials) == len(tokens) and all(c.revoked_at is not None for c in credentials)
    assert credentials[0].revoked_at == earlier.revoked_at  # an earlier revocation is kept
    assert all(c.revoked_at == world.editor.left_at for c in credentials[1:])
    events = AuditEvent.objects.filter(
        action="credential.revoked", target__in=[f"credential {c.prefix}" for c in credentials[1:]]
    )
    assert events.count() == 2 and all(e.actor == world.owner.user and "membership" in e.reason for e in events)


def test_a_removal_that_fails_revokes_nothing(world):
    agent_token(world.editor)
    real_audit = actions.audit

    def failing(action, **kwargs):
        if action == "member.removed":
            raise RuntimeError("the removal's last write fails")
        return real_audit(action, **kwargs)

    with mock.patch.object(actions, "audit", failing), pytest.raises(RuntimeError):
        actions.remove_member(world.editor, actor=world.owner.user)
    assert Credential.objects.filter(member=world.editor, revoked_at__isnull=True).count() == 1
    assert Member.objects.get(pk=world.editor.pk).left_at is None


# --- after remove → re-add, nothing issued before opens the workspace -------------------------------
def test_an_agent_credential_of_an_earlier_membership_opens_no_agent_route_after_re_adding(world):
    token = agent_token(world.editor)
    assert agent_answers(token)["memories/list"] == 200
    member = re_add(world.editor)
    assert member.left_at is None
    assert set(agent_answers(token).values()) == {401}
    assert set(mcp_codes(token).values()) == {"UNAUTHENTICATED"}
    assert Credential.objects.get(member=member).revoked_at is not None
    fresh = agent_token(member)
    assert agent_answers(fresh)["memories/list"] == 200 and mcp_codes(fresh)["list"] is None


def test_an_earlier_periods_credential_stays_refused_even_if_its_revocation_was_never_written(world):
    """Rows from before the fix, or a revocation lost some other way: the gate still compares the
    credential with the start of the current membership period."""
    token = agent_token(world.editor)
    member = re_add(world.editor)
    Credential.objects.filter(member=member).update(revoked_at=None)
    assert set(agent_answers(token).values()) == {401}


def test_a_personal_token_issued_before_the_re_add_opens_no_route_of_that_workspace_but_still_opens_the_others(world):
    actions.add_member(world.other_workspace, world.editor.user.email, role="viewer")
    token = actions.issue_personal_token(world.editor.user)
    client = APIClient()
    header = {"HTTP_AUTHORIZATION": f"Token {token}"}
    paths = workspace_paths(world.workspace.pk, "api/w/", path_ids(world.editor))
    assert len(paths) == len([r for r, _ in routes() if r.startswith("api/w/")])
    assert client.get(f"/api/w/{world.workspace.pk}/agent-credentials", **header).status_code == 200
    member = re_add(world.editor)
    statuses = api_statuses(client, paths, **header)
    assert set(statuses.values()) == {401}, {p: s for p, s in statuses.items() if s != 401}
    assert error_code(client.get(f"/api/w/{world.workspace.pk}/agent-credentials", **header)) == "UNAUTHENTICATED"
    assert client.get(f"/api/w/{world.other_workspace.pk}/agent-credentials", **header).status_code == 200
    fresh = actions.issue_personal_token(member.user)
    assert (
        client.get(f"/api/w/{world.workspace.pk}/agent-credentials", HTTP_AUTHORIZATION=f"Token {fresh}").status_code
        == 200
    )


def test_a_session_from_before_the_re_add_opens_no_api_route_and_no_page_until_the_member_logs_in_again(world):
    browser = session_for(world.editor.user)
    assert browser.get(f"/w/{world.workspace.pk}/settings/agent-access/").status_code == 200
    member = re_add(world.editor)
    api = APIClient()
    api.cookies = browser.cookies
    statuses = api_statuses(api, workspace_paths(world.workspace.pk, "api/w/", path_ids(member)))
    assert set(statuses.values()) == {401}, {p: s for p, s in statuses.items() if s != 401}
    # The page asks for a new login (and ends the old session: it was issued before the period).
    response = browser.get(f"/w/{world.workspace.pk}/ai-memory/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=")
    assert "_auth_user_id" not in browser.session
    pages = workspace_paths(world.workspace.pk, "w/", path_ids(member))
    assert len(pages) == len([r for r, _ in routes() if r.startswith("w/")])
    for path in pages:
        stale = Client()
        stale.force_login(member.user)
        session = stale.session
        session[SESSION_AUTHENTICATED_AT] = (member.joined_at - timedelta(microseconds=1)).isoformat()
        session.save()
        response = stale.get(path)
        if response.status_code == 405:
            response = stale.post(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), (
            path,
            response.status_code,
        )
    again = session_for(member.user)
    assert again.get(f"/w/{world.workspace.pk}/settings/agent-access/").status_code == 200
    login_page = again.get("/accounts/login/", follow=True)
    assert login_page.status_code == 200


def test_a_session_without_a_login_time_does_not_open_a_re_added_membership(world):
    """Sessions created before login times were recorded hold none: they open a first membership,
    never a re-added one."""
    member = re_add(world.editor)
    browser = session_for(member.user)
    session = browser.session
    del session[SESSION_AUTHENTICATED_AT]
    session.save()
    assert browser.get(f"/w/{world.workspace.pk}/ai-memory/").status_code == 302
    first = session_for(world.viewer.user)
    session = first.session
    del session[SESSION_AUTHENTICATED_AT]
    session.save()
    assert first.get(f"/w/{world.workspace.pk}/ai-memory/").status_code == 200


def test_a_first_membership_opens_to_a_session_and_token_issued_before_it(world):
    """Joining a workspace for the first time needs no new login: only a re-added membership starts
    a period that refuses what came before."""
    user = actions.ensure_user("newcomer@acme.test", password="pw-new-12345")
    token = actions.issue_personal_token(user)
    browser = session_for(user)
    actions.add_member(world.workspace, user.email, role="viewer")
    assert browser.get(f"/w/{world.workspace.pk}/ai-memory/").status_code == 200
    assert (
        APIClient()
        .get(f"/api/w/{world.workspace.pk}/ask-history/settings", HTTP_AUTHORIZATION=f"Token {token}")
        .status_code
        == 200
    )


def test_the_removal_and_re_add_are_recorded_as_periods(world):
    member = re_add(world.editor)
    assert member.period == 2
    member = re_add(member)
    assert member.period == 3
    body = client_for(world.owner).get(f"/api/w/{world.workspace.pk}/members").json()
    assert any(m["id"] == str(member.pk) for m in body["members"])


# --- a deleted user ------------------------------------------------------------------------------
def test_deleting_a_user_ends_every_membership_and_revokes_every_credential(world):
    editor = world.editor
    actions.add_member(world.other_workspace, editor.user.email, role="editor")
    other = Member.objects.get(workspace=world.other_workspace, user=editor.user)
    tokens = [agent_token(editor), agent_token(other)]
    for token in tokens:
        assert AgentClient(token).remember(namespace="prefs", key="k", text="Prefers tea").status_code == 201
    personal = actions.issue_personal_token(editor.user)
    browser = session_for(editor.user)
    member_ids, user_id, email = [editor.pk, other.pk], editor.user.pk, editor.user.email
    prefixes = list(Credential.objects.filter(member_id__in=member_ids).values_list("prefix", flat=True))
    editor.user.delete()  # any path: a shell, a script, a future admin action (the admin refuses, below)
    assert not User.objects.filter(pk=user_id).exists()
    assert not MemoryVersion.objects.filter(member_id__in=member_ids).exists()
    receipts = DeletionReceipt.objects.filter(member_ref__in=member_ids, operation="member_removal")
    assert {r.member_ref for r in receipts} == set(member_ids)
    assert (
        AuditEvent.objects.filter(action="member.removed", target__in=[f"member #{pk}" for pk in member_ids]).count()
        == 2
    )
    assert (
        AuditEvent.objects.filter(action="credential.revoked", target__in=[f"credential {p}" for p in prefixes]).count()
        == 2
    )
    assert AuditEvent.objects.filter(action="personal_token.revoked").count() == 1
    for token in tokens:
        assert set(agent_answers(token).values()) == {401}
    assert (
        APIClient()
        .get(f"/api/w/{world.workspace.pk}/ask-history/settings", HTTP_AUTHORIZATION=f"Token {personal}")
        .status_code
        == 401
    )
    assert browser.get(f"/w/{world.workspace.pk}/ai-memory/").status_code == 302
    # The same person signs up again and is added again: nothing of the deleted account opens anything.
    actions.add_member(world.workspace, email, role="editor")
    for token in tokens:
        assert set(agent_answers(token).values()) == {401}
    assert (
        APIClient()
        .get(f"/api/w/{world.workspace.pk}/ask-history/settings", HTTP_AUTHORIZATION=f"Token {personal}")
        .status_code
        == 401
    )
    assert browser.get(f"/w/{world.workspace.pk}/ai-memory/").status_code == 302


def test_the_admin_cannot_delete_the_account_of_someone_who_is_or_was_a_member(world, staff):
    """Deleting an account erases a member's memories in every workspace: the admin refuses it
    (the member rows it would cascade to are not deletable there); a member leaves through removal."""
    token = agent_token(world.editor)
    admin = session_for(staff.superuser)
    assert admin.post(f"/admin/auth/user/{world.editor.user.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk = admin.post(
        "/admin/auth/user/", {"action": "delete_selected", "_selected_action": [world.editor.user.pk], "post": "yes"}
    )
    assert bulk.status_code in (200, 302, 403)
    assert User.objects.filter(pk=world.editor.user.pk).exists()
    assert agent_answers(token)["memories/list"] == 200


def test_deleting_the_last_owners_user_still_ends_the_membership(world):
    owner = world.outsider
    owner.user.delete()
    assert not Member.objects.filter(pk=owner.pk).exists()
    assert AuditEvent.objects.filter(action="member.removed", target=f"member #{owner.pk}").exists()


# --- generated sequences -------------------------------------------------------------------------------
ROLES = ("viewer", "editor", "admin", "owner")
_emails = itertools.count()


class MembershipMachine(RuleBasedStateMachine):
    """One person in one workspace; every credential they were ever given, with the membership
    period (the number of times they had been added) it was issued in. Whatever the sequence,
    only what was issued in the current period (or, for a first membership, before it) opens it."""

    @initialize()
    def start(self):
        workspace, self.owner = actions.create_workspace(
            f"W{next(_emails)}", owner_email=f"owner{next(_emails)}@gen.test"
        )
        actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=self.owner.user)
        self.workspace = workspace
        self.email = f"pat{next(_emails)}@gen.test"
        self.user = actions.ensure_user(self.email, password="pw-pat-12345")
        self.member: Member | None = None
        self.adds = 0
        self.role = None
        self.issued: list[tuple[str, object, int]] = []  # (kind, token or client, adds when issued)

    @property
    def active(self) -> bool:
        return self.member is not None and Member.objects.filter(pk=self.member.pk, left_at__isnull=True).exists()

    @precondition(lambda self: not self.active)
    @rule(role=st.sampled_from(ROLES))
    def add(self, role):
        self.member = actions.add_member(self.workspace, self.email, role=role)
        self.adds += 1
        self.role = role

    @precondition(lambda self: self.active)
    @rule()
    def remove(self):
        actions.remove_member(self.member, actor=self.owner.user)

    @precondition(lambda self: self.active)
    @rule(role=st.sampled_from(ROLES))
    def change_role(self, role):
        self.member = actions.change_role(self.member, role, actor=self.owner.user)
        self.role = role

    @precondition(lambda self: self.active)
    @rule()
    def issue_agent_credential(self):
        scopes = ["memory:read"] + (["memory:write"] if self.role != "viewer" else [])
        self.issued.append(("agent", agent_token(self.member, scopes=scopes), self.adds))

    @rule()
    def issue_personal_token(self):
        self.issued.append(("personal", actions.issue_personal_token(self.user), self.adds))

    @rule()
    def log_in(self):
        self.issued.append(("session", session_for(self.user), self.adds))

    @invariant()
    def only_the_current_period_opens_the_workspace(self):
        active = self.active
        for kind, credential, adds_then in self.issued:
            if kind == "agent":
                opens = active and adds_then == self.adds
                status = AgentClient(credential).list().status_code
                assert (status == 200) == opens and (status == 401) == (not opens), (kind, adds_then, self.adds, status)
            else:
                opens = active and (adds_then == self.adds or self.adds == 1)
                path = f"/api/w/{self.workspace.pk}/ask-history/settings"
                if kind == "personal":
                    status = APIClient().get(path, HTTP_AUTHORIZATION=f"Token {credential}").status_code
                else:
                    api = APIClient()
                    api.cookies = credential.cookies
                    status = api.get(path).status_code
                assert (status == 200) == opens, (kind, adds_then, self.adds, active, status)
                assert status in (200, 401, 404)


def test_generated_membership_sequences_never_revive_an_earlier_credential(world):
    run_state_machine_as_test(
        MembershipMachine,
        settings=settings(
            max_examples=25,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )


def test_the_member_list_shows_no_credential_of_a_removed_member_as_active(world, staff):
    agent_token(world.editor)
    actions.remove_member(world.editor, actor=world.owner.user)
    page = session_for(staff.auditor).get("/admin/governance/credential/?status=active").content.decode()
    assert json.dumps(world.editor.user.email)[1:-1] not in page
