"""The workspace's region for masking (issue 33 item 5): an ask-history setting (`phoneRegion`, ISO
3166 alpha-2 or null) the owner sets in the API and on the settings page; a code phonenumbers does
not know is a VALIDATION_ERROR naming the field, never a 500; and what members store in a
workspace with a region has that country's mobiles masked without a phone word."""

import pytest
from django.test import Client

from governance.models import AuditEvent
from memoryapp import assistant
from memoryapp.models import Source
from tests.support import client_for, error_code, make_agent

pytestmark = pytest.mark.django_db

DANISH = "Dana wrote 34 43 39 58 on the form"
POLISH = "Here it is: 512 863 990, keep it safe"


def settings_url(world, workspace=None) -> str:
    return f"/api/w/{(workspace or world.workspace).pk}/ask-history/settings"


def page_url(world) -> str:
    return f"/w/{world.workspace.pk}/settings/ask-history/"


def set_region(world, region):
    response = client_for(world.owner).put(settings_url(world), {"phoneRegion": region}, format="json")
    assert response.status_code == 200, response.content
    return response


def test_the_owner_sets_and_clears_the_region(world):
    assert client_for(world.viewer).get(settings_url(world)).json()["phoneRegion"] is None
    assert set_region(world, "DK").json()["phoneRegion"] == "DK"
    assert client_for(world.editor).get(settings_url(world)).json()["phoneRegion"] == "DK"
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region == "DK"
    assert AuditEvent.objects.filter(action="settings.changed").latest("id").changes == {"phoneRegion": [None, "DK"]}
    assert set_region(world, None).json()["phoneRegion"] is None
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region is None


@pytest.mark.parametrize("region", ["dk", "DNK", "XX", "001", "", " DK", 45, ["DK"], {"code": "DK"}, True])
def test_a_region_phonenumbers_does_not_know_is_a_validation_error(world, region):
    set_region(world, "PL")
    response = client_for(world.owner).put(settings_url(world), {"phoneRegion": region}, format="json")
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert list(response.json()["error"]["details"]["fields"]) == ["phoneRegion"]
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region == "PL"


@pytest.mark.parametrize("who", ["editor", "viewer"])
def test_only_the_owner_sets_the_region(world, who):
    response = client_for(getattr(world, who)).put(settings_url(world), {"phoneRegion": "DK"}, format="json")
    assert response.status_code == 403 and error_code(response) == "FORBIDDEN"


def test_a_dry_run_shows_the_region_and_saves_nothing(world):
    response = client_for(world.owner).put(settings_url(world), {"phoneRegion": "NO", "dryRun": True}, format="json")
    assert response.status_code == 200 and response.json()["settings"]["phoneRegion"] == "NO"
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region is None


@pytest.mark.parametrize(
    "region, text, masked",
    [("DK", DANISH, "Dana wrote [PHONE] on the form"), ("PL", POLISH, "Here it is: [PHONE], keep it safe")],
)
def test_an_agent_memory_has_the_region_mobile_masked_and_another_workspace_keeps_its_behaviour(
    world, region, text, masked
):
    set_region(world, region)
    agent = make_agent(world.editor)
    stored = agent.remember(namespace="contacts", key="dana", text=text)
    assert stored.status_code == 201, stored.content
    listed = agent.list(namespace="contacts").json()["memories"]
    assert [(m["text"], m["masked"]) for m in listed] == [(masked, ["PHONE"])]
    # the other workspace has no region: the same text is stored as written (pairs and ascending
    # triples read as lists without a country, docs/masking.md)
    other = make_agent(world.outsider)
    assert other.remember(namespace="contacts", key="dana", text=text).status_code == 201
    assert [m["text"] for m in other.list(namespace="contacts").json()["memories"]] == [text]


def test_details_are_masked_with_the_region_too(world):
    set_region(world, "DK")
    agent = make_agent(world.editor)
    assert (
        agent.remember(
            namespace="contacts",
            key="dana",
            text="Dana from the book club",
            details=["mobile 34 43 39 58", DANISH, "prefers evenings"],
        ).status_code
        == 201
    )
    memory = agent.list(namespace="contacts").json()["memories"][0]
    assert "34 43" not in str(memory) and "prefers evenings" in str(memory)
    # the line without the word "mobile" is the region's to mask: another workspace keeps it
    other = make_agent(world.outsider)
    assert other.remember(namespace="contacts", key="dana", text="Dana", details=[DANISH]).status_code == 201
    assert other.list(namespace="contacts").json()["memories"][0]["details"] == [DANISH]


def test_an_assistant_memory_has_the_region_mobile_masked(world):
    set_region(world, "DK")
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="dana_contact", summary=DANISH, details=[], source=Source.USER_REQUEST
    )
    assert version.text == "Dana wrote [PHONE] on the form"


def test_the_owner_sets_the_region_on_the_settings_page(world):
    client = Client()
    client.force_login(world.owner.user)
    html = client.get(page_url(world)).content.decode()
    assert 'name="phone_region"' in html and '<option value="DK">DK</option>' in html
    base = {"agent_memories_enabled": "on", "agent_memory_retention_days": 90, "expired_grace_days": 30}
    response = client.post(page_url(world), {**base, "phone_region": "DK"})
    assert response.status_code == 302
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region == "DK"
    refused = client.post(page_url(world), {**base, "phone_region": "ZZ"})
    assert refused.status_code == 200 and "phone_region" in refused.context["form"].errors
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region == "DK"
    assert client.post(page_url(world), {**base, "phone_region": ""}).status_code == 302
    world.workspace.ask_history.refresh_from_db()
    assert world.workspace.ask_history.phone_region is None


def test_a_conversation_turn_with_a_region_mobile_is_skipped_as_personal_data(world):
    """The turn's check passes the region: a Danish mobile in pairs is personal data in a Danish
    workspace (never stored, never sent), and the same turn elsewhere is no personal data."""
    from credits.models import Consolidation
    from memoryapp.consolidation import submit_turn
    from tests.credits.support import ai_agent, user_says

    agent = ai_agent(world)
    set_region(world, "DK")
    world.workspace.ask_history.refresh_from_db()
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says(DANISH),
    )
    assert submitted.consolidation.reason == "personal_data" and submitted.personal_data == [
        {"index": 0, "role": "user", "kinds": ["PHONE"]}
    ]
    assert Consolidation.objects.get(pk=submitted.consolidation.pk).messages is None
    set_region(world, None)
    world.workspace.ask_history.refresh_from_db()
    again = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c2",
        anonymous=False,
        messages=user_says(DANISH),
    )
    assert again.consolidation.reason != "personal_data" and again.personal_data == []
