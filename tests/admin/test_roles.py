"""Auditor, operator and superuser on every admin change list, change page and action: staff
roles are Django groups and the admin checks their permissions, never their names."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group

from governance.admin_roles import AUDITOR, OPERATOR, sync_staff_groups
from tests.admin.support import admin_url, browser, product_admins

pytestmark = pytest.mark.django_db


def governed_actions(model_admin) -> list[str]:
    return [action.__name__ for action in (model_admin.actions or []) if hasattr(action, "required_permission")]


def test_the_data_migration_creates_both_groups_with_view_and_governed_permissions(db):
    migration = importlib.import_module("governance.migrations.0003_staff_groups")
    Group.objects.filter(name__in=[AUDITOR, OPERATOR]).delete()

    class Editor:
        class connection:
            alias = "default"

    migration.create_staff_groups(django_apps, Editor)
    auditor = set(Group.objects.get(name=AUDITOR).permissions.values_list("content_type__app_label", "codename"))
    operator = set(Group.objects.get(name=OPERATOR).permissions.values_list("content_type__app_label", "codename"))
    assert ("memoryapp", "view_memoryversion") in auditor
    assert ("retention", "view_deletionreceipt") in auditor
    assert ("governance", "view_agent") in auditor
    assert all(codename.startswith("view_") for _, codename in auditor)
    assert auditor < operator
    assert {c for _, c in operator - auditor} == {
        "revoke_credential",
        "set_platform_flags",
        "erase_member_memories",
        "reverify_receipt",
    }


def test_groups_are_kept_in_step_for_every_registered_model(staff):
    sync_staff_groups(django_apps)
    for model, _ in product_admins():
        codename = f"{model._meta.app_label}.view_{model._meta.model_name}"
        assert staff.auditor.has_perm(codename), codename
        assert staff.operator.has_perm(codename), codename
        assert not staff.auditor.has_perm(f"{model._meta.app_label}.change_{model._meta.model_name}")


def test_every_change_list_answers_every_staff_role(everything, staff):
    for name, user in staff.all():
        client = browser(user)
        for model, _ in product_admins():
            response = client.get(admin_url(model, "changelist"))
            assert response.status_code == 200, (name, model)


def test_a_member_who_is_not_staff_is_sent_to_the_login_page(world):
    client = browser(world.owner.user)
    assert client.get("/admin/").status_code == 302
    assert client.get("/admin/memoryapp/memoryversion/").status_code == 302


def test_every_change_page_is_viewable_and_no_post_changes_anything(everything, staff):
    for model, _ in product_admins():
        obj = model._default_manager.first()
        assert obj is not None, f"fixture lacks a {model.__name__}"
        url = admin_url(model, "change", obj.pk)
        for name, user in staff.all():
            client = browser(user)
            assert client.get(url).status_code == 200, (name, model)
            if name != "superuser" or model._meta.model_name != "workspace":
                assert client.post(url, {}).status_code == 403, (name, model)
            assert client.get(admin_url(model, "delete", obj.pk)).status_code == 403, (name, model)
            assert client.post(admin_url(model, "delete", obj.pk), {"post": "yes"}).status_code == 403, (name, model)


def test_nobody_adds_rows_except_superusers_creating_workspaces(everything, staff):
    for model, _ in product_admins():
        for name, user in staff.all():
            status = browser(user).get(admin_url(model, "add")).status_code
            expected = 200 if (name == "superuser" and model._meta.model_name == "workspace") else 403
            assert status == expected, (name, model)
            if expected == 403:
                assert browser(user).post(admin_url(model, "add"), {}).status_code == 403


def test_an_auditor_post_to_any_action_answers_403(everything, staff):
    client = browser(staff.auditor)
    for model, model_admin in product_admins():
        obj = model._default_manager.first()
        for action in governed_actions(model_admin) + ["delete_selected", ""]:
            for data in (
                {"action": action, "_selected_action": [obj.pk]},
                {"action": action, "_selected_action": [obj.pk], "confirm": "yes", "reason": "audit"},
            ):
                response = client.post(admin_url(model, "changelist"), data)
                assert response.status_code == 403, (model, action)


def test_operators_and_superusers_see_governed_actions_and_auditors_none(everything, staff):
    seen = set()
    for model, model_admin in product_admins():
        actions = governed_actions(model_admin)
        if not actions:
            continue
        changelist = admin_url(model, "changelist")
        assert 'name="action"' not in browser(staff.auditor).get(changelist).content.decode()
        obj = model._default_manager.first()
        for user in (staff.operator, staff.superuser):
            client = browser(user)
            page = client.get(changelist).content.decode()
            for action in actions:
                assert f'value="{action}"' in page
                confirmation = client.post(changelist, {"action": action, "_selected_action": [obj.pk]})
                assert confirmation.status_code == 200, (model, action)
                body = confirmation.content.decode()
                assert 'name="reason"' in body and 'name="confirm" value="yes"' in body
                seen.add(action)
    assert seen == {
        "enable_ai_memory",
        "disable_ai_memory",
        "make_non_retaining",
        "resume_retaining",
        "erase_member_memories",
        "revoke_credential",
        "reverify",
    }


def test_delete_selected_is_not_offered_anywhere(everything, staff):
    client = browser(staff.superuser)
    for model, _ in product_admins():
        assert 'value="delete_selected"' not in client.get(admin_url(model, "changelist")).content.decode(), model


def test_an_action_without_a_reason_shows_the_form_again_and_changes_nothing(world, staff):
    from governance.models import Credential
    from tests.support import make_agent

    make_agent(world.editor)
    credential = Credential.objects.get(member=world.editor)
    response = browser(staff.operator).post(
        admin_url(Credential, "changelist"),
        {"action": "revoke_credential", "_selected_action": [credential.pk], "confirm": "yes", "reason": "   "},
    )
    assert response.status_code == 200
    assert "A reason is required" in response.content.decode() or "This field is required" in response.content.decode()
    credential.refresh_from_db()
    assert credential.revoked_at is None


def test_users_and_groups_are_viewable_by_auditors_and_refuse_their_posts(staff):
    from django.contrib.auth import get_user_model

    User = get_user_model()
    client = browser(staff.auditor)
    for model, obj in ((User, staff.operator), (Group, Group.objects.get(name=OPERATOR))):
        assert client.get(admin_url(model, "changelist")).status_code == 200
        assert client.get(admin_url(model, "change", obj.pk)).status_code == 200
        assert client.post(admin_url(model, "change", obj.pk), {}).status_code == 403
        assert (
            client.post(
                admin_url(model, "changelist"), {"action": "delete_selected", "_selected_action": [obj.pk]}
            ).status_code
            == 403
        )
    page = client.get(admin_url(User, "change", staff.operator.pk)).content.decode()
    assert staff.operator.password not in page
