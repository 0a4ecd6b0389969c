"""Attacks on credentials after their reads moved to `Credential.objects.restrict` (8d89206): the
list, the API revoke and the agent-access page's revoke reach the caller's own credentials only,
whatever their role (an owner included), and never another workspace's; staff and agents reach
none."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from governance import actions as g
from governance.models import Credential
from tests.pages.support import browser
from tests.support import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def creds(world):
    made = {}
    for name in ("owner", "editor", "viewer", "outsider"):
        member = getattr(world, name)
        credential, token = g.create_credential(member, name=f"cred-{name}", scopes=["memory:read"])
        made[name] = (credential, token)
    return made


def api(member, credential_id=None) -> str:
    base = f"/api/w/{member.workspace_id}/agent-credentials"
    return base if credential_id is None else f"{base}/{credential_id}"


def revoked(credential) -> bool:
    return Credential.objects.get(pk=credential.pk).revoked_at is not None


@pytest.mark.parametrize("caller", ["owner", "editor", "viewer", "outsider"])
def test_the_credentials_list_is_the_callers_own_whatever_the_role(world, creds, caller):
    member = getattr(world, caller)
    response = client_for(member).get(api(member))
    assert response.status_code == 200, response.content
    assert [c["name"] for c in response.json()["credentials"]] == [f"cred-{caller}"]


@pytest.mark.parametrize(
    ("attacker", "victim"),
    [("owner", "editor"), ("editor", "owner"), ("viewer", "editor"), ("outsider", "editor"), ("owner", "outsider")],
)
def test_no_member_revokes_anothers_credential_by_id_through_the_api_or_the_page(world, creds, attacker, victim):
    member, target = getattr(world, attacker), creds[victim][0]
    response = client_for(member).delete(api(member, target.pk))
    assert response.status_code == 404, response.content
    page = browser(member).post(f"/w/{member.workspace_id}/settings/agent-access/{target.pk}/revoke/")
    assert page.status_code == 404
    # the victim's workspace in the path, as the attacker: an outsider is no member there (404 too)
    across = client_for(member).delete(f"/api/w/{target.workspace_id}/agent-credentials/{target.pk}")
    assert across.status_code == 404
    assert not revoked(target)


def test_a_member_revokes_their_own_credential_through_the_api_and_the_page(world, creds):
    api_target, _ = creds["owner"]
    assert client_for(world.owner).delete(api(world.owner, api_target.pk)).status_code == 204
    assert revoked(api_target)
    page_target, _ = creds["editor"]
    response = browser(world.editor).post(f"/w/{world.workspace.pk}/settings/agent-access/{page_target.pk}/revoke/")
    assert response.status_code == 302
    assert revoked(page_target)


def test_the_agent_access_page_lists_only_the_members_own_credentials(world, creds):
    for name in ("owner", "editor", "viewer"):
        member = getattr(world, name)
        text = browser(member).get(f"/w/{world.workspace.pk}/settings/agent-access/").content.decode()
        assert f"cred-{name}" in text
        assert not [other for other in creds if other != name and f"cred-{other}" in text]


def test_staff_and_agents_neither_list_nor_revoke_credentials(world, creds, staff):
    target, token = creds["editor"]
    for _, user in staff.all():
        client = client_for(user)
        assert client.get(api(world.editor)).status_code == 404
        assert client.delete(api(world.editor, target.pk)).status_code == 404
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert agent.get(api(world.editor)).status_code in (401, 403, 404)
    assert agent.delete(api(world.editor, target.pk)).status_code in (401, 403, 404)
    assert not revoked(target)


def test_a_removed_members_credentials_are_no_one_elses_to_list(world, creds):
    g.remove_member(world.editor, actor=world.owner.user)
    listed = client_for(world.owner).get(api(world.owner)).json()["credentials"]
    assert [c["name"] for c in listed] == ["cred-owner"]
    assert client_for(world.owner).delete(api(world.owner, creds["editor"][0].pk)).status_code == 404
