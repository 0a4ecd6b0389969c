"""Masking end to end (issue 13 §3, §6): attacks through the real remember path, names that
must stay free of personal data, the closed `kind` vocabulary, conversation turns screened by the
same detector, and the turns' own size cap and rate limit."""

from __future__ import annotations

import importlib
import json

import pytest
from django.apps import apps
from django.core.exceptions import FieldError

from credits.models import Consolidation
from memoryapp.masking import MAX_MASKED_CHARS, mask
from memoryapp.models import ASSISTANT_NAMESPACE, MEMORY_KINDS, MemoryVersion
from memoryapp.ratelimit import get_limiter
from tests.credits.support import ai_agent, grant, post_turn, user_says
from tests.masking.known_texts import BENIGN, EXACT
from tests.masking.pii_corpus import build_corpus, survivors
from tests.support import _refusal, client_for, error_code, make_agent

SAMPLE = [s for s in build_corpus(seed=29)[::37] if s.text.strip() != s.value][:140]


def _credential_id(agent_client) -> int:
    from governance.auth import find_credential

    return find_credential(agent_client.token).pk


# --- the real remember path --------------------------------------------------------------------
def test_generated_values_never_reach_the_database(agent):
    credential_id = _credential_id(agent)
    limiter = get_limiter()
    assert len(SAMPLE) >= 120
    for index, sample in enumerate(SAMPLE):
        if index % 100 == 0:
            limiter.reset(credential_id)
        response = agent.remember(namespace="generated", text=sample.text, details=[sample.text])
        if response.status_code == 400:
            assert error_code(response) == "AGENT_MEMORY_EMPTY", (sample, response.json())
            assert not any(sample.value in v.text for v in MemoryVersion.objects.all())  # sealed: opened to be searched
            continue
        assert response.status_code == 201, (sample, response.json())
        memory = response.json()["memory"]
        stored = MemoryVersion.objects.get(pk=int(memory["id"]))
        for text in (memory["text"], stored.text, stored.details):
            assert survivors(sample, text) == [], (sample, text)
        assert memory["masked"], sample


@pytest.mark.parametrize("text, expected", [pair for pair in EXACT if not pair[1].startswith("[")])
def test_a_remember_with_a_reported_attack_answers_201_with_the_masked_text(agent, text, expected):
    response = agent.remember(namespace="attacks", text=text)
    assert response.status_code == 201, response.json()
    assert response.json()["memory"]["text"] == expected
    assert MemoryVersion.objects.get(pk=int(response.json()["memory"]["id"])).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "dana@example。com",
        "054\u200b123\u200b4567",
        "+1 212 555 0123 ext. 12",
        "「ghp_0123456789abcdefghijABCDEFGHIJ012345」",
    ],
)
def test_nothing_but_personal_data_is_refused_as_empty(agent, text):
    response = agent.remember(namespace="attacks", text=text)
    assert response.status_code == 400
    assert error_code(response) == "AGENT_MEMORY_EMPTY"


def test_benign_sentences_are_stored_as_written(agent):
    for text in BENIGN[:30]:
        response = agent.remember(namespace="benign", text=text)
        assert response.status_code == 201
        assert response.json()["memory"]["text"] == text
        assert response.json()["memory"]["masked"] == []


@pytest.mark.parametrize(
    "field, value",
    [
        ("namespace", "dana@exämple.com"),
        ("namespace", "calls-054\u200b123\u200b4567"),
        ("key", "password=hunter2"),
        ("key", "ｃａｌｌ０５４１２３４５６７"),
        ("key", "ghp_0123456789abcdefghijABCDEFGHIJ012345"),
        ("namespace", "card-4111.1111.1111.1111"),
    ],
)
def test_personal_data_in_namespace_or_key_is_refused(agent, field, value):
    body = {"namespace": "ok", "key": "ok", "text": "a note"}
    body[field] = value
    response = agent.call("remember", body)
    assert response.status_code == 400
    assert error_code(response) == "AGENT_MEMORY_PERSONAL_DATA"
    assert value not in json.dumps(response.json(), ensure_ascii=False)


@pytest.mark.parametrize("field", ["namespace", "key"])
@pytest.mark.parametrize(
    "value",
    [
        "card 4111\t1111\t1111\t1111",
        "tel\t090\t1234\t5678",
        "4111 1111\t1111 1111",
        "card\n4111\n1111\n1111\n1111",
        "口座番号 1234、5678、90",
        "card 4111\u22151111\u22151111\u22151111",
        "card 4111\u20441111\u20441111\u20441111",
        "4111 . 1111 . 1111 . 1111",
    ],
)
def test_digit_groups_joined_by_any_separator_are_refused_as_a_name(agent, field, value):
    # issue 22 row 4: the separator class (whitespace, line breaks, look-alike joiners) of text
    body = {"namespace": "ok", "key": "ok", "text": "a note"}
    body[field] = value
    response = agent.call("remember", body)
    assert response.status_code == 400, response.json()
    assert error_code(response) == "AGENT_MEMORY_PERSONAL_DATA"
    assert value not in json.dumps(response.json(), ensure_ascii=False)


# --- kind: a closed vocabulary -----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["ada@example.com 054-123-4567", "Fact", "preferences", "", "note"])
def test_a_kind_outside_the_vocabulary_is_refused_in_the_agent_api(agent, kind):
    response = agent.remember(namespace="kinds", text="prefers tea", kind=kind)
    assert response.status_code == 400
    assert error_code(response) == "VALIDATION_ERROR"
    assert "kind" in response.json()["error"]["details"]["fields"]
    if kind:
        assert kind not in json.dumps(response.json())


@pytest.mark.parametrize("kind", MEMORY_KINDS)
def test_each_kind_of_the_vocabulary_is_accepted(agent, kind):
    response = agent.remember(namespace="kinds", text="prefers tea", kind=kind)
    assert response.status_code == 201
    assert response.json()["memory"]["kind"] == kind


def test_the_ai_memory_api_refuses_a_kind_outside_the_vocabulary(world):
    client = client_for(world.editor)
    base = f"/api/w/{world.workspace.pk}/ai-memory/memories"
    bad = client.post(
        base, {"kind": "ada@example.com 054-123-4567", "topic": "tea", "summary": "prefers tea"}, format="json"
    )
    assert bad.status_code == 400 and error_code(bad) == "VALIDATION_ERROR"
    assert "ada@example.com" not in json.dumps(bad.json())
    good = client.post(base, {"kind": "preference", "topic": "tea", "summary": "prefers tea"}, format="json")
    assert good.status_code == 201
    patched = client.patch(
        f"{base}/{good.json()['memory']['id']}", {"kind": "secret 4111 1111 1111 1111"}, format="json"
    )
    assert patched.status_code == 400 and error_code(patched) == "VALIDATION_ERROR"


def test_the_ai_memory_page_offers_exactly_the_vocabulary():
    from memoryapp.pages.forms import KIND_CHOICES, AssistantMemoryEditForm

    assert tuple(sorted(k for k, _ in KIND_CHOICES)) == tuple(sorted(MEMORY_KINDS))
    form = AssistantMemoryEditForm(current_kind="ada@example.com")
    assert sorted(k for k, _ in form.fields["kind"].choices) == sorted(MEMORY_KINDS)


def test_the_kind_migration_cannot_run_on_sealed_kinds_nor_can_a_free_text_kind_be_written(agent):
    """Migration 0003 cleared free-text kinds while `kind` was a plain column. Since 0009 seals it
    (SPEC §8.2) no query reaches it: re-running 0003 refuses (never a silent no-op), and no
    update() can write a kind past the vocabulary check."""
    agent.remember(namespace="kinds", text="prefers tea", kind="fact")
    migration = importlib.import_module("memoryapp.migrations.0003_memory_kind_vocabulary")
    with pytest.raises(FieldError, match="sealed"):
        migration.clear_unknown_kinds(apps, None)
    assert agent.remember(namespace="kinds", text="likes hiking", kind="ada@example.com").status_code == 400
    with pytest.raises(TypeError, match="sealed"):  # last: a refused update() marks the transaction for rollback
        MemoryVersion.objects.update(kind="ada@example.com 054-123-4567")


# --- other stored free text goes through the same detector --------------------------------------
@pytest.mark.parametrize("conversation_id", ["dana@example.com", "chat-054\u200b123\u200b4567", "password=hunter2"])
def test_a_conversation_id_with_personal_data_is_refused(world, agent, conversation_id):
    helper = ai_agent(world)
    response = post_turn(agent, helper, user_says("hello"), conversation_id=conversation_id)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "conversationId" in response.json()["error"]["details"]["fields"]
    usage = agent.client.generic(
        "POST",
        "/api/agent/v1/usage/replies",
        json.dumps({"conversationId": conversation_id, "model": "gpt-x", "inputTokens": 1, "outputTokens": 1}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent.token}",
    )
    assert usage.status_code == 400 and error_code(usage) == "VALIDATION_ERROR"
    assert Consolidation.objects.filter(conversation_id=conversation_id).count() == 0


def test_agent_and_credential_names_with_personal_data_are_refused(world):
    client = client_for(world.owner)
    agent = client.post(f"/api/w/{world.workspace.pk}/agents", {"name": "Dana 054-123-4567"}, format="json")
    assert agent.status_code == 400 and error_code(agent) == "VALIDATION_ERROR"
    credential = client.post(
        f"/api/w/{world.workspace.pk}/agent-credentials",
        {"name": "laptop of dana@example.com", "scopes": ["memory:read"]},
        format="json",
    )
    assert credential.status_code == 400 and error_code(credential) == "VALIDATION_ERROR"
    fine = client.post(
        f"/api/w/{world.workspace.pk}/agent-credentials", {"name": "laptop 2", "scopes": ["memory:read"]}, format="json"
    )
    assert fine.status_code == 201


# --- conversation turns are screened by the same detector ---------------------------------------
def test_a_turn_is_skipped_exactly_when_remember_would_mask(world, agent):
    helper = ai_agent(world)
    grant(world.workspace)
    credential_id = _credential_id(agent)
    limiter = get_limiter()
    texts = [s.text for s in SAMPLE[:40]] + [t for t, _ in EXACT[:20]] + BENIGN[:20]
    for index, text in enumerate(texts):
        if index % 50 == 0:
            limiter.reset(credential_id, bucket="turn")
        response = post_turn(agent, helper, user_says(text), conversation_id=f"conv-{index}")
        assert response.status_code in (200, 202), response.json()
        consolidation = response.json()["consolidation"]
        if mask(text).kinds:
            assert (consolidation["status"], consolidation["reason"]) == ("skipped", "personal_data"), text
            stored = Consolidation.objects.get(pk=int(consolidation["id"]))
            assert stored.messages is None
        else:
            assert consolidation["status"] == "queued", text


def test_a_turn_over_the_size_cap_is_refused(world, agent):
    helper = ai_agent(world)
    per_message = 8000
    messages = [{"role": "user", "content": "a" * per_message} for _ in range(MAX_MASKED_CHARS // per_message + 1)]
    response = post_turn(agent, helper, messages)
    assert response.status_code == 400 and error_code(response) == "VALIDATION_ERROR"
    assert "messages" in response.json()["error"]["details"]["fields"]
    at_cap = [{"role": "user", "content": "a" * per_message} for _ in range(MAX_MASKED_CHARS // per_message)]
    assert post_turn(agent, helper, at_cap).status_code in (200, 202)


def test_turns_have_a_rate_limit_of_their_own(world, agent, settings):
    settings.AGENT_TURNS_PER_HOUR = 3
    helper = ai_agent(world)
    for i in range(3):
        response = post_turn(agent, helper, user_says("I like tea"), conversation_id=f"c{i}")
        assert response.status_code in (200, 202)
        assert response["RateLimit-Limit"] == "3"
        assert response["RateLimit-Remaining"] == str(2 - i)
    refused = post_turn(agent, helper, user_says("I like tea"), conversation_id="c3")
    assert refused.status_code == 429
    assert error_code(refused) == "AGENT_MEMORY_RATE_LIMITED"
    assert int(refused["Retry-After"]) >= 1
    # remembers keep their own budget
    remembered = agent.remember(namespace="n", text="still fine")
    assert remembered.status_code == 201
    assert remembered["RateLimit-Limit"] == "120"


def test_an_invalid_turn_does_not_use_up_the_budget(world, agent, settings):
    settings.AGENT_TURNS_PER_HOUR = 1
    helper = ai_agent(world)
    assert post_turn(agent, helper, user_says("hi"), conversation_id="dana@example.com").status_code == 400
    assert post_turn(agent, 99999999, user_says("hi")).status_code == 404
    assert post_turn(agent, helper, user_says("hi")).status_code in (200, 202)
    assert post_turn(agent, helper, user_says("hi")).status_code == 429


def test_turn_limits_count_per_credential(world, agent, settings):
    settings.AGENT_TURNS_PER_HOUR = 1
    helper = ai_agent(world)
    other = make_agent(world.editor)
    assert post_turn(agent, helper, user_says("hi")).status_code in (200, 202)
    assert post_turn(agent, helper, user_says("hi")).status_code == 429
    assert post_turn(other, helper, user_says("hi")).status_code in (200, 202)


# --- issue 22: the forms masking missed are refused as names on every path --------------------
def _forms_sample():
    from tests.masking.forms_corpus import FORMS, build_forms_corpus

    corpus = build_forms_corpus(seed=23, per_form=2)
    return [
        next(s for s in corpus if s.form == form and s.locale == locale)
        for form in FORMS
        for locale in ("en_US", "de_DE", "ja_JP")
    ]


FORM_NAMES = [s.text for s in _forms_sample() if len(s.text) <= 64] + [
    "411111 111111 1111",
    "4111,1111,1111,1111",
    "dana at example dot com",
    "passwort ist hunter2",
    "mysql -u root -phunter2",
]
# the same forms as snake_case topics (a topic cannot hold a space)
FORM_TOPICS = [
    "card_411111_111111_1111",
    "wire_to_123456_789012",
    "dana_at_example_dot_com",
    "passwort_ist_hunter2",
    "my_password_is_swordfish",
    "call_5551234",
    "telefon_5551234",
]


@pytest.mark.parametrize("value", FORM_NAMES)
@pytest.mark.parametrize("field", ["namespace", "key"])
def test_the_new_forms_are_refused_as_namespace_or_key_over_rest_and_mcp(agent, field, value):
    from memoryapp.mcp import tools

    body = {"namespace": "ok", "key": "ok", "text": "a note"}
    body[field] = value
    rest = agent.call("remember", body)
    assert rest.status_code == 400 and error_code(rest) == "AGENT_MEMORY_PERSONAL_DATA", (value, rest.json())
    assert value not in json.dumps(rest.json(), ensure_ascii=False)
    mcp = tools.run_operation(agent.token, "remember", body)
    assert mcp.is_error and mcp.structured_content == rest.json()
    assert MemoryVersion.objects.count() == 0


@pytest.mark.parametrize("topic", FORM_TOPICS)
def test_the_new_forms_are_refused_as_assistant_topics_by_the_api_the_page_and_consolidation(world, topic):
    from core.errors import ApiError
    from memoryapp.assistant import add_assistant_memory
    from memoryapp.models import Source

    client = client_for(world.editor)
    response = client.post(
        f"/api/w/{world.workspace.pk}/ai-memory/memories",
        {"kind": "fact", "topic": topic, "summary": "a note"},
        format="json",
    )
    assert response.status_code == 400 and error_code(response) == "AGENT_MEMORY_PERSONAL_DATA", response.json()
    assert topic not in json.dumps(response.json())
    from tests.pages.support import browser

    page = browser(world.editor).post(
        f"/w/{world.workspace.pk}/ai-memory/add/", {"kind": "fact", "topic": topic, "summary": "a note", "details": ""}
    )
    assert page.status_code == 200 and "personal data" in page.content.decode(), page.status_code
    with pytest.raises(ApiError) as refused:  # what consolidation calls for each extracted memory
        add_assistant_memory(world.editor, kind="fact", topic=topic, summary="a note", source=Source.AI_EXTRACTED)
    assert refused.value.code == "AGENT_MEMORY_PERSONAL_DATA"
    assert MemoryVersion.objects.count() == 0


@pytest.mark.parametrize(
    "topic",
    [
        "preferred_language",
        "password_manager",
        "phone_model",
        "api_key_rotation",
        "call_schedule",
        "email_at_work",
        "favourite_number_7",
    ],
)
def test_ordinary_snake_case_topics_are_accepted(world, topic):
    response = client_for(world.editor).post(
        f"/api/w/{world.workspace.pk}/ai-memory/memories",
        {"kind": "fact", "topic": topic, "summary": "a note"},
        format="json",
    )
    assert response.status_code == 201, response.json()


def test_details_lines_are_masked_and_a_line_left_empty_is_dropped(world):
    agent = make_agent(world.editor)
    memory = agent.remember(
        namespace="n", text="How to reach her", details=["mail ada@example.com", "4111 1111 1111 1111", "likes tea"]
    ).json()["memory"]
    assert memory["details"] == ["mail [EMAIL]", "likes tea"]
    assert memory["masked"] == ["CARD", "EMAIL"]
    error = _refusal(
        agent.remember(namespace="n", text="ada@example.com", details=["likes tea"]), 400, "AGENT_MEMORY_EMPTY"
    )
    assert error["details"] == {"masked": ["EMAIL"]}


def test_details_are_masked_before_they_are_stored(world):
    agent = make_agent(world.editor)
    response = agent.remember(
        namespace=ASSISTANT_NAMESPACE,
        key="contact",
        source="user_request",
        kind="fact",
        text="How to reach the member",
        details=["mail ada@example.com", "phone +1 (212) 555-0199", "card 4111 1111 1111 1111"],
    )
    assert response.status_code == 201, response.content
    memory = response.json()["memory"]
    stored = MemoryVersion.objects.get(pk=memory["id"]).details
    for secret in ("ada@example.com", "555-0199", "4111"):
        assert secret not in stored and secret not in json.dumps(memory)
    assert {"EMAIL", "PHONE", "CARD"} <= set(memory["masked"])
