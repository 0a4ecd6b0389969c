"""No admin path yields a member's session outside the audited step, and the member sees when it was
used (issue 22 row 5, SPEC §10).

The attack: with `ADMIN_MAY_VIEW_MEMORY_CONTENT` off, a superuser set a member's password at
`/admin/auth/user/<id>/password/`, logged in as the member and read their memories; only Django's
LogEntry recorded it. Now that view (and every other admin path that could hand someone a
member's password, login or API access) is refused for a user who is or was a workspace member,
unless the deployment turned the audited step on — and then it asks for a reason, writes a
product audit event, and the member's Settings → Agent access page says "An administrator set
your password on …" in English and Japanese. The last test walks every URL the admin serves and
fails on one nobody classified.
"""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import Group, Permission
from django.contrib.sessions.models import Session
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, reverse

from governance import actions
from governance.models import AuditEvent, Credential, Member, PersonalToken, Workspace
from tests.admin.support import browser
from tests.support import make_agent

pytestmark = pytest.mark.django_db
User = get_user_model()

NEW_PASSWORD = "admin-chosen-Pw-4711"
PASSWORD_EVENT = "account.password_set_by_admin"


def password_url(user) -> str:
    return reverse("admin:auth_user_password_change", args=[user.pk])


def set_password(client: Client, user, *, reason: str | None = "Support ticket 4711: the member asked") -> object:
    data = {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true", "set-password": "1"}
    if reason is not None:
        data["reason"] = reason
    return client.post(password_url(user), data)


def can_log_in_as(user, password: str) -> bool:
    return Client().login(username=user.username, password=password)


def agent_access_page(member: Member, language: str = "en") -> str:
    client = Client()
    client.force_login(User.objects.get(pk=member.user_id))  # as stored now (its password may have changed)
    client.cookies["django_language"] = language
    response = client.get(f"/w/{member.workspace_id}/settings/agent-access/")
    assert response.status_code == 200
    return response.content.decode()


# --- the password view ---------------------------------------------------------------------------
def test_a_superuser_cannot_set_a_members_password_while_the_audited_step_is_off(world, staff):
    member_user = world.editor.user
    before = User.objects.get(pk=member_user.pk).password
    client = browser(staff.superuser)
    assert client.get(password_url(member_user)).status_code == 403
    assert set_password(client, member_user).status_code == 403
    unset = client.post(password_url(member_user), {"usable_password": "false", "unset-password": "1"})
    assert unset.status_code == 403
    assert User.objects.get(pk=member_user.pk).password == before
    assert not can_log_in_as(member_user, NEW_PASSWORD) and can_log_in_as(member_user, "pw-editor-123")


def test_a_removed_members_password_is_protected_too(world, staff):
    """A removed member may be re-added: a password the admin knows would open their next period."""
    actions.remove_member(world.editor, actor=world.owner.user)
    assert set_password(browser(staff.superuser), world.editor.user).status_code == 403
    assert not can_log_in_as(world.editor.user, NEW_PASSWORD)


@override_settings(ADMIN_MAY_VIEW_MEMORY_CONTENT=True)
def test_with_the_audited_step_on_a_superuser_sets_it_only_with_a_reason_and_the_member_sees_it(world, staff):
    member_user = world.editor.user
    client = browser(staff.superuser)
    form = client.get(password_url(member_user))
    assert form.status_code == 200 and 'name="reason"' in form.content.decode()
    assert set_password(client, member_user, reason=None).status_code == 200  # the form again: a reason is required
    assert set_password(client, member_user, reason="   ").status_code == 200
    assert (
        not can_log_in_as(member_user, NEW_PASSWORD) and not AuditEvent.objects.filter(action=PASSWORD_EVENT).exists()
    )
    response = set_password(client, member_user)
    assert response.status_code == 302
    assert can_log_in_as(member_user, NEW_PASSWORD)
    event = AuditEvent.objects.get(action=PASSWORD_EVENT)
    assert (
        event.actor == staff.superuser
        and event.reason.startswith("Support ticket 4711")
        and event.target == f"user #{member_user.pk}"
    )
    english = agent_access_page(world.editor)
    assert "An administrator set your password on" in english and "Support ticket 4711" in english
    japanese = agent_access_page(world.editor, "ja")
    assert "管理者があなたのパスワードを設定しました" in japanese
    # The member of several workspaces sees it in each.
    actions.add_member(world.other_workspace, member_user.email, role="viewer")
    assert "An administrator set your password on" in agent_access_page(
        Member.objects.get(workspace=world.other_workspace, user=member_user)
    )
    # Nobody else sees it on their page.
    assert "An administrator set your password on" not in agent_access_page(world.viewer)


@override_settings(ADMIN_MAY_VIEW_MEMORY_CONTENT=True)
def test_staff_who_are_not_superusers_never_set_a_members_password(world, staff):
    operator = staff.operator
    operator.user_permissions.add(
        Permission.objects.get(codename="change_user"), Permission.objects.get(codename="view_user")
    )
    operator = User.objects.get(pk=operator.pk)
    assert operator.has_perm("auth.change_user")
    assert set_password(browser(operator), world.editor.user).status_code == 403
    assert not can_log_in_as(world.editor.user, NEW_PASSWORD)


def test_a_staff_accounts_password_may_be_set_and_is_recorded_for_the_day_it_becomes_a_member(world, staff):
    """Platform staff are no members: their passwords are set as usual. The event is written
    anyway, so an account an admin prepared and that later joins a workspace shows it."""
    helper = User.objects.create_user("helper@platform.test", "helper@platform.test", "pw-helper-123", is_staff=True)
    response = set_password(browser(staff.superuser), helper, reason=None)
    assert response.status_code == 302 and can_log_in_as(helper, NEW_PASSWORD)
    assert AuditEvent.objects.filter(action=PASSWORD_EVENT, target=f"user #{helper.pk}").count() == 1
    member = actions.add_member(world.workspace, "helper@platform.test", role="viewer")
    assert "An administrator set your password on" in agent_access_page(member)


def test_an_account_the_admin_created_with_a_password_shows_it_once_it_joins(world, staff):
    client = browser(staff.superuser)
    response = client.post(
        reverse("admin:auth_user_add"),
        {
            "username": "future@acme.test",
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
            "usable_password": "true",
        },
    )
    assert response.status_code == 302, response.content
    future = User.objects.get(username="future@acme.test")
    member = actions.add_member(world.workspace, "future@acme.test", role="viewer")
    assert member.user == future
    assert "An administrator set your password on" in agent_access_page(member)


# --- the other paths to a member's account ------------------------------------------------------------
def test_the_user_change_form_cannot_change_a_members_login_or_password(world, staff):
    member_user = world.editor.user
    before = User.objects.get(pk=member_user.pk)
    client = browser(staff.superuser)
    page = client.get(reverse("admin:auth_user_change", args=[member_user.pk])).content.decode()
    assert 'name="username"' not in page and 'name="email"' not in page
    response = client.post(
        reverse("admin:auth_user_change", args=[member_user.pk]),
        {
            "username": "attacker@evil.test",
            "email": "attacker@evil.test",
            "password": make_password(NEW_PASSWORD),
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    assert response.status_code in (200, 302)
    after = User.objects.get(pk=member_user.pk)
    assert (after.username, after.email, after.password) == (before.username, before.email, before.password)
    assert not can_log_in_as(after, NEW_PASSWORD)


def test_the_add_user_form_cannot_take_over_an_existing_members_login(world, staff):
    client = browser(staff.superuser)
    before = User.objects.count()
    response = client.post(
        reverse("admin:auth_user_add"),
        {
            "username": world.editor.user.username,
            "password1": NEW_PASSWORD,
            "password2": NEW_PASSWORD,
            "usable_password": "true",
        },
    )
    assert response.status_code == 200 and User.objects.count() == before
    assert not can_log_in_as(world.editor.user, NEW_PASSWORD)


def test_no_admin_creates_or_edits_a_personal_token_credential_membership_or_session(world, staff):
    make_agent(world.editor)
    actions.issue_personal_token(world.editor.user)
    client = browser(staff.superuser)
    for model in (PersonalToken, Credential, Member):
        assert (
            client.post(
                reverse(f"admin:governance_{model._meta.model_name}_add"),
                {"user": world.editor.user.pk, "member": world.editor.pk},
            ).status_code
            == 403
        )
        obj = model.objects.first()
        assert (
            client.post(
                reverse(f"admin:governance_{model._meta.model_name}_change", args=[obj.pk]),
                {"user": staff.superuser.pk},
            ).status_code
            == 403
        )
    assert Session not in admin.site._registry and LogEntry not in admin.site._registry
    assert PersonalToken.objects.count() == 1


def test_creating_a_workspace_for_a_members_email_gives_nobody_their_password(world, staff):
    before = User.objects.get(pk=world.editor.user.pk).password
    response = browser(staff.superuser).post(
        reverse("admin:governance_workspace_add"),
        {
            "name": "Side project",
            "owner_email": world.editor.user.email,
            "ai_memory_available": "on",
            "retains_history": "on",
        },
    )
    assert response.status_code == 302
    assert User.objects.get(pk=world.editor.user.pk).password == before
    assert Workspace.objects.filter(name="Side project").exists()


# --- the walk ------------------------------------------------------------------------------------------------
def admin_url_names(resolver=None) -> set[str]:
    resolver = resolver or URLResolver(r"^admin/", admin.site.get_urls())
    names = set()
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            names |= admin_url_names(entry)
        elif isinstance(entry, URLPattern) and entry.name:
            names.add(entry.name)
    return names


#: Admin URLs of no model: the admin's own pages, none of which touches another account.
SITE_URLS = {
    "index",
    "login",
    "logout",
    "password_change",
    "password_change_done",
    "autocomplete",
    "jsi18n",
    "view_on_site",
    "app_list",
}
#: Views of every registered model that show rows and cannot write a credential, login or password.
READ_VIEWS = ("changelist", "history", "export_csv", "content")
#: What a product admin may write through its add/change views: a workspace (name, flags, and a
#: first owner, whose account gets no password). Every other product add/change answers 403.
PRODUCT_WRITES = {"governance_workspace_add", "governance_workspace_change"}
#: The user and group admins (Django's): each path was tried above.
ACCOUNT_PATHS = {
    "auth_user_password_change": "refused for a member outside the audited step; audited and shown to the member in it",
    "auth_user_change": "username, email and password read-only for a member; is_active / staff flags give nobody a "
    "session",
    "auth_user_add": "a new account only (an existing login is refused); an admin-set password is recorded and shown "
    "once it joins",
    "auth_user_delete": "refused for someone who is or was a member (their rows are not deletable here)",
    "auth_group_add": "groups grant admin permissions to staff, never a member's session",
    "auth_group_change": "as above",
    "auth_group_delete": "as above",
}


@override_settings(ADMIN_MAY_VIEW_MEMORY_CONTENT=True)
def test_every_admin_url_is_classified_and_every_product_write_is_refused(world, staff):
    make_agent(world.editor)
    actions.issue_personal_token(world.editor.user)
    names = admin_url_names()
    unclassified = []
    client = browser(staff.superuser)
    for name in sorted(names):
        if (
            name in SITE_URLS
            or name in ACCOUNT_PATHS
            or name.endswith(READ_VIEWS)
            or name.endswith("_delete")
            and not name.startswith("auth_")
        ):
            continue
        if name.endswith(("_add", "_change")) and not name.startswith("auth_"):
            if name in PRODUCT_WRITES:
                continue
            model_name = name.rsplit("_", 1)[0]
            model = next(m for m in admin.site._registry if f"{m._meta.app_label}_{m._meta.model_name}" == model_name)
            args = (
                [model._default_manager.first().pk]
                if name.endswith("_change") and model._default_manager.exists()
                else None
            )
            if name.endswith("_change") and args is None:
                continue
            response = client.post(
                reverse(f"admin:{name}", args=args), {"user": world.editor.user.pk, "member": world.editor.pk}
            )
            assert response.status_code == 403, name
            continue
        unclassified.append(name)
    assert unclassified == [], "classify each new admin URL: can it yield a member's session, password or API access?"
    for name in ACCOUNT_PATHS:
        assert name in names, name
    # Deletes of product rows are refused too (receipts, audit events, memories are read-only).
    for model in admin.site._registry:
        if model._meta.app_label in ("governance", "memoryapp", "retention", "credits"):
            obj = model._default_manager.first()
            if obj is not None:
                assert (
                    client.post(
                        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_delete", args=[obj.pk]),
                        {"post": "yes"},
                    ).status_code
                    == 403
                ), model
    # Groups give staff admin permissions only: a member in a group is still refused the password path.
    group = Group.objects.create(name="helpdesk")
    group.permissions.add(Permission.objects.get(codename="change_user"))
    helpdesk = User.objects.create_user("desk@platform.test", "desk@platform.test", "pw-desk-123", is_staff=True)
    helpdesk.groups.add(group)
    assert set_password(browser(helpdesk), world.editor.user).status_code == 403


@pytest.mark.parametrize("content_view", [False, True])
def test_who_may_set_whose_password_in_the_admin(world, django_user_model, settings, content_view):
    """`governance.auth.may_set_password`, the rule the account admin asks: their own always; a
    member's account only through the audited step (an active superuser, where the deployment
    allows it); a superuser's or another admin's only as a superuser; anyone else's as staff."""
    from governance.auth import may_set_password

    settings.ADMIN_MAY_VIEW_MEMORY_CONTENT = content_view
    root = django_user_model.objects.create_user("root", "root@ops.test", "x", is_staff=True, is_superuser=True)
    operator = django_user_model.objects.create_user("op", "op@ops.test", "x", is_staff=True)
    colleague = django_user_model.objects.create_user("op2", "op2@ops.test", "x", is_staff=True)
    outsider = django_user_model.objects.create_user("plain", "plain@ops.test", "x")
    member = world.editor.user
    assert may_set_password(root, root) and may_set_password(operator, operator)
    assert may_set_password(root, member) is content_view and not may_set_password(operator, member)
    assert may_set_password(root, operator) and may_set_password(root, outsider)
    assert not may_set_password(operator, root) and not may_set_password(operator, colleague)
    assert may_set_password(operator, outsider)
