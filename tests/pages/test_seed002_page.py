"""The member's pages as seed 002 describes them (issue 34 §6), without a browser: the topic is
editable (a new topic moves the memory and closes the old topic), the AI memory page carries the
usage and credits note, every date is written one way per language with its time zone, and a new
credential's page shows a connection snippet that works. The browser's view of the same is in
tests/pages/test_browser_seed002.py."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone, translation
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from governance.templatetags.moments import moment
from memoryapp import assistant
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion, Source
from tests.pages.support import MOMENT, browser, messages_of, text_of, url
from tests.support import client_for, error_code, make_agent

pytestmark = pytest.mark.django_db

DAY = {
    "en": re.compile(r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [1-9][0-9]?, [0-9]{4} UTC"),
    "ja": re.compile(r"[0-9]{4}年[1-9][0-9]?月[1-9][0-9]?日 UTC"),
}
# What the pages wrote before: Django's DATE_FORMAT/SHORT_DATE_FORMAT ("Dec. 5, 2026", "12/05/2026").
OLD_FORMS = re.compile(
    r"\b(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\. "
    r"[0-9]|\b[0-9]{2}/[0-9]{2}/[0-9]{4}\b|[0-9]{4}/[0-9]{2}/[0-9]{2}"
)


def edit(client, world, memory_id: int, **fields):
    body = {"kind": "fact", "summary": "Codename is Aurora", "details": ""} | fields
    return client.post(f"/w/{world.workspace.pk}/ai-memory/{memory_id}/edit/", body, follow=True)


def chain(member, key: str) -> list[MemoryVersion]:
    return list(MemoryVersion.objects.filter(member=member, namespace=ASSISTANT_NAMESPACE, key=key).order_by("version"))


# --- the topic is editable --------------------------------------------------------------------------
def test_a_new_topic_stores_a_new_version_under_it_and_closes_the_old_one(world):
    old, _ = assistant.add_assistant_memory(
        world.editor,
        kind="fact",
        topic="demo_product_code",
        summary="Codename is Aurora",
        details=["Use it in headings"],
        source=Source.USER_REQUEST,
    )
    client = browser(world.editor)
    form = text_of(client.get(f"/w/{world.workspace.pk}/ai-memory/{old.pk}/edit/"))
    assert 'name="topic"' in form and 'value="demo_product_code"' in form
    assert "the old topic is closed" in form  # what a new topic means, said before saving
    response = edit(client, world, old.pk, topic="product_codename", details="Use it in headings")
    assert "Memory moved to the new topic; the old topic is closed." in messages_of(response)
    (moved,) = chain(world.editor, "product_codename")
    (closed,) = chain(world.editor, "demo_product_code")
    assert (moved.version, moved.valid_to, moved.source, moved.text, moved.details) == (
        1,
        None,
        Source.USER_REQUEST,
        "Codename is Aurora",
        "Use it in headings",
    )
    assert closed.pk == old.pk and closed.valid_to == moved.valid_from  # closed, not erased: history up to the move
    assert [m["topic"] for m in response.context["memories"]] == ["product_codename"]


def test_a_new_topic_the_member_already_has_becomes_its_next_version(world):
    kept, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="product_codename", summary="Codename is Borealis", details=[]
    )
    moving, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="demo_product_code", summary="Codename is Aurora", details=[]
    )
    edit(browser(world.editor), world, moving.pk, topic="product_codename")
    versions = chain(world.editor, "product_codename")
    assert [(v.version, v.valid_to is None, v.text) for v in versions] == [
        (1, False, "Codename is Borealis"),
        (2, True, "Codename is Aurora"),
    ]
    assert (
        MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE, valid_to__isnull=True).count()
        == 1
    )


def test_keeping_the_topic_is_an_ordinary_edit(world):
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="product_codename", summary="Codename is Aurora", details=[]
    )
    response = edit(browser(world.editor), world, version.pk, topic="product_codename", summary="Codename is Borealis")
    assert "Memory updated." in messages_of(response)
    assert [(v.version, v.valid_to is None) for v in chain(world.editor, "product_codename")] == [(1, False), (2, True)]


@pytest.mark.parametrize("topic", ["Not Snake", "product-codename", "ダミー", "dana_at_example_com_4155550134", ""])
def test_a_topic_that_is_no_english_snake_case_key_or_holds_personal_data_changes_nothing(world, topic):
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="product_codename", summary="Codename is Aurora", details=[]
    )
    response = edit(browser(world.editor), world, version.pk, topic=topic)
    assert response.context["form"].errors["topic"]
    assert [(v.key, v.version, v.valid_to) for v in MemoryVersion.objects.filter(member=world.editor)] == [
        ("product_codename", 1, None)
    ]


def test_the_api_moves_a_memory_to_a_new_topic_and_refuses_another_members(world):
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="preference", topic="answer_language", summary="Answers in Japanese", details=[]
    )
    path = f"/api/w/{world.workspace.pk}/ai-memory/memories/{version.pk}"
    assert client_for(world.owner).patch(path, {"topic": "hijacked"}, format="json").status_code == 404  # not theirs
    refused = client_for(world.editor).patch(path, {"topic": "reach_me_at_ada_example_com_4155550134"}, format="json")
    assert refused.status_code in (400, 422) and error_code(refused) in (
        "AGENT_MEMORY_PERSONAL_DATA",
        "VALIDATION_ERROR",
    )
    assert chain(world.editor, "answer_language")[0].valid_to is None
    moved = client_for(world.editor).patch(path, {"topic": "preferred_language"}, format="json")
    assert moved.status_code == 200 and moved.json()["memory"]["topic"] == "preferred_language"
    assert chain(world.editor, "answer_language")[0].valid_to is not None
    listed = client_for(world.editor).get(f"/api/w/{world.workspace.pk}/ai-memory/memories").json()["memories"]
    assert [(m["topic"], m["summary"], m["kind"]) for m in listed] == [
        ("preferred_language", "Answers in Japanese", "preference")
    ]


def test_a_closed_topic_can_be_neither_edited_nor_moved_again(world):
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="first_topic", summary="A fact", details=[]
    )
    client = browser(world.editor)
    edit(client, world, version.pk, topic="second_topic")
    assert client.get(f"/w/{world.workspace.pk}/ai-memory/{version.pk}/edit/").status_code == 404
    assert (
        client_for(world.editor)
        .patch(f"/api/w/{world.workspace.pk}/ai-memory/memories/{version.pk}", {"topic": "third_topic"}, format="json")
        .status_code
        == 404
    )
    assert not MemoryVersion.objects.filter(key="third_topic").exists()


SNAKE = st.from_regex(r"[a-z][a-z0-9]{0,8}(_[a-z][a-z0-9]{0,8}){0,3}", fullmatch=True)


@given(topics=st.lists(SNAKE, min_size=1, max_size=4))
@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_run_of_moves_leaves_one_current_memory_and_every_old_topic_closed(world, topics):
    MemoryVersion.objects.filter(member=world.editor).delete()
    version, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="start_topic", summary="The same fact", details=[]
    )
    for topic in topics:
        version = assistant.edit_assistant_memory(
            world.editor, version.pk, kind=None, summary=None, details=None, topic=topic
        )
    current = list(MemoryVersion.objects.filter(member=world.editor, valid_to__isnull=True))
    assert [(v.key, v.text) for v in current] == [(topics[-1], "The same fact")]
    assert all(
        v.valid_to is not None for v in MemoryVersion.objects.filter(member=world.editor).exclude(pk=current[0].pk)
    )


# --- the usage and credits note ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "language, phrases",
    [
        (
            "en",
            [
                "Usage and credits",
                "system model",
                "AI memory (input)",
                "already counted in input usage",
                "still charged",
                "anonymous visitor",
            ],
        ),
        (
            "ja",
            [
                "使用量と料金",
                "システムモデル",
                "AI メモリ（入力）",
                "入力使用量に計上済み",
                "料金が発生します",
                "匿名訪問者",
            ],
        ),
    ],
)
def test_the_ai_memory_page_says_how_ai_memory_uses_credits(world, language, phrases):
    html = text_of(browser(world.editor, language=language).get(url(world, "ai-memory")))
    section = html[html.index('id="usage-and-credits"') :]
    for phrase in phrases:
        assert phrase in section, phrase
    assert f'href="/w/{world.workspace.pk}/usage/"' in section


# --- one date format per language, with the zone ----------------------------------------------------
@given(instant=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)))
@hypothesis_settings(max_examples=200, deadline=None)
def test_every_instant_is_written_one_way_per_language_with_its_zone(instant):
    for language in ("en", "ja"):
        with translation.override(language):
            assert MOMENT[language].fullmatch(moment(instant)), (language, moment(instant))
            assert DAY[language].fullmatch(moment(instant.date())), (language, moment(instant.date()))


@pytest.mark.parametrize("language", ["en", "ja"])
def test_the_member_pages_write_every_date_in_the_one_format(world, language):
    assistant.add_assistant_memory(
        world.editor, kind="fact", topic="product_codename", summary="Codename is Aurora", details=[]
    )
    expired, _ = assistant.add_assistant_memory(
        world.editor, kind="fact", topic="old_office", summary="Office was in Shinagawa", details=[]
    )
    MemoryVersion.objects.filter(pk=expired.pk).update(retention_anchor=timezone.now() - timedelta(days=91))
    agent = make_agent(world.editor)
    assert agent.remember(namespace="crm", key="tier", text="Nagano Foods is on the Enterprise plan").status_code == 201
    assert agent.recall(query="Nagano").status_code == 200  # an access-history entry
    client = browser(world.editor, language=language)
    for page in ("ai-memory", "agent-memories", "agent-access"):
        html = text_of(client.get(url(world, page)))
        times = re.findall(r"<time datetime=\"[^\"]+\">([^<]+)</time>", html)
        assert times, page
        for written in times:
            assert MOMENT[language].fullmatch(written), (page, written)
        assert not OLD_FORMS.search(html), (page, OLD_FORMS.search(html))


# --- the connection snippet -----------------------------------------------------------------------------
def test_a_new_credential_shows_a_snippet_that_connects_and_the_token_only_once(world):
    client = browser(world.editor)
    response = client.post(
        url(world, "agent-access"), {"name": "Research bot", "scopes": ["memory:read", "memory:write"]}
    )
    assert response["Cache-Control"] == "no-store"
    token = response.context["created"]["token"]
    snippet = response.context["created"]["snippet"]
    html = text_of(response)
    assert 'id="snippet-env"' in html and 'id="snippet-mcp"' in html
    env = dict(part.split("=", 1) for line in snippet["env"].splitlines() for part in shlex.split(line)[1:])
    assert env == {"GAM_URL": "http://testserver", "GAM_TOKEN": token}
    config = json.loads(snippet["mcp"])["mcpServers"]["agent-memory"]
    assert config["type"] == "http" and config["url"] == "http://testserver/mcp"
    header = config["headers"]["Authorization"]
    assert header == f"Bearer {token}"
    listed = APIClient().post("/api/agent/v1/memories/list", {}, format="json", HTTP_AUTHORIZATION=header)
    assert listed.status_code == 200  # the header as pasted is accepted
    assert token not in text_of(client.get(url(world, "agent-access")))  # never again


def test_no_snippet_without_a_new_credential(world):
    html = text_of(browser(world.editor).get(url(world, "agent-access")))
    assert "snippet-env" not in html and "GAM_TOKEN" not in html
