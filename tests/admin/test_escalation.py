"""Found in review of issue 22: staff could make themselves superuser, or take a superuser's
account by setting its password; and a re-spelt login dodged the log-in throttle."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from governance import login_throttle


@pytest.fixture
def operator(db):
    user = get_user_model().objects.create_user("op@platform.test", password="pw-op-12345", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_user", "view_user"]))
    client = Client()
    client.force_login(user)
    return user, client


def test_staff_with_change_user_cannot_tick_their_own_superuser_box(operator):
    user, client = operator
    page = client.get(f"/admin/auth/user/{user.pk}/change/")
    assert page.status_code == 200
    assert (
        b'name="is_superuser"' not in page.content
        and b'name="user_permissions"' not in page.content
        and b'name="groups"' not in page.content
    )
    client.post(
        f"/admin/auth/user/{user.pk}/change/",
        {"username": user.username, "email": user.email, "is_active": "on", "is_staff": "on", "is_superuser": "on"},
    )
    user.refresh_from_db()
    assert not user.is_superuser


def test_staff_cannot_set_a_superusers_password(operator):
    _, client = operator
    root = get_user_model().objects.create_superuser("root@platform.test", password="pw-root-12345")
    assert client.get(f"/admin/auth/user/{root.pk}/password/").status_code == 403
    client.post(
        f"/admin/auth/user/{root.pk}/password/",
        {"password1": "taken-over-123", "password2": "taken-over-123", "reason": "x"},
    )
    root.refresh_from_db()
    assert root.check_password("pw-root-12345")


@pytest.mark.parametrize("spelling", ["ｏwner@acme.test", "OWNER@ACME.TEST ", "ｏｗｎｅｒ＠ａｃｍｅ．ｔｅｓｔ"])
def test_a_re_spelt_login_counts_against_the_same_account(spelling):
    assert login_throttle._account_key(spelling) == login_throttle._account_key("owner@acme.test")
    assert login_throttle._key(spelling, "203.0.113.7") == login_throttle._key("owner@acme.test", "203.0.113.7")
