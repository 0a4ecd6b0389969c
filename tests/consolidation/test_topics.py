"""Consolidation's topics (issue 34 §6, issue 22 review D): one fact per memory, each under a
readable topic of the fixed English snake_case vocabulary (`memoryapp.topics`), never the
member's words — a topic is a key, and the admin sees keys (SPEC §10).

Before: the offline model stored a free-form request as `user_note_<10 hex>` (opaque to the
member) and a request of two facts as one memory; a topic that holds several memories
(`deadline`) now numbers them (`deadline_2`), and the same subject updates its own."""

from __future__ import annotations

import csv
import io
import re

import pytest
from faker import Faker
from hypothesis import assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memoryapp import topics
from memoryapp.consolidation import run_consolidation, submit_turn
from memoryapp.masking import name_kinds
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from memoryapp.system_models import SYSTEM_PROMPT, ExtractedMemory, OfflineRulesModel
from tests.admin.support import admin_url, browser
from tests.credits.support import StubModel, ai_agent, grant, use_stub, user_says

pytestmark = pytest.mark.django_db

LOCALES = ("en_US", "ja_JP", "he_IL", "fr_FR", "de_DE", "pt_BR", "es_ES", "it_IT", "zh_CN", "ko_KR", "ru_RU", "ar_AA")
KEY = re.compile(r"(?P<topic>[a-z][a-z0-9_]*?)(?:_(?P<n>[2-9]|[1-9][0-9]))?")
VOCABULARY_WORDS = {word for name in topics.VOCABULARY for word in name.split("_")}


def is_vocabulary_key(key: str) -> bool:
    """`deadline`, `deadline_2` … `deadline_50`: a vocabulary name, numbered only if it holds several."""
    if key in topics.VOCABULARY:
        return True
    match = KEY.fullmatch(key)
    return bool(
        match
        and match["n"]
        and match["topic"] in topics.VOCABULARY
        and topics.is_many(match["topic"])
        and int(match["n"]) <= topics.MAX_SLOTS
    )


@pytest.fixture
def consolidate(world):
    grant(world.workspace, "1000")
    agent = ai_agent(world)

    def run(member, text: str) -> list[MemoryVersion]:
        submitted = submit_turn(
            workspace=world.workspace,
            member=member,
            agent=agent,
            credential_id=None,
            conversation_id="c",
            anonymous=False,
            messages=user_says(text),
        )
        assert submitted.consolidation.status == "queued", submitted.json()
        assert run_consolidation(submitted.consolidation.pk)["status"] == "done"
        return list(
            MemoryVersion.objects.filter(member=member, namespace=ASSISTANT_NAMESPACE, valid_to__isnull=True).order_by(
                "id"
            )
        )

    return run


def words_of(text: str) -> set[str]:
    return {w for w in re.findall(r"\w{3,}", text.casefold())}


# --- one fact per memory --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Remember that the demo product codename is Aurora. The launch deadline is Friday.",
            [
                ("product_codename", "The demo product codename is Aurora"),
                ("deadline", "The launch deadline is Friday"),
            ],
        ),
        (
            "Remember that my manager is Ken and the release date is March 3",
            [("manager", "My manager is Ken"), ("deadline", "The release date is March 3")],
        ),
        (
            "覚えてください。締め切りは金曜日で、担当チームは営業部です",
            [("deadline", "締め切りは金曜日です"), ("team", "担当チームは営業部です")],
        ),
        (
            "覚えてください。デモ製品のコードネームは Aurora です。打ち合わせは毎週火曜日です",
            [
                ("product_codename", "デモ製品のコードネームは Aurora です"),
                ("meeting_schedule", "打ち合わせは毎週火曜日です"),
            ],
        ),
    ],
)
def test_two_facts_in_one_request_are_two_memories_with_readable_topics(world, consolidate, text, expected):
    memories = consolidate(world.editor, text)
    assert [(m.key, m.text) for m in memories] == expected
    assert all(m.details == "" for m in memories)


def test_a_sentence_that_refers_back_stays_a_detail_of_its_fact(world, consolidate):
    """Seed 002's example: the instruction about "this codename" belongs to the codename."""
    (memory,) = consolidate(
        world.editor,
        "覚えてください。デモ製品のコードネームは Aurora です。"
        "今後、製品紹介を書くときはこのコードネームを使ってください",
    )
    assert (memory.key, memory.kind, memory.text) == (
        "product_codename",
        "instruction",
        "デモ製品のコードネームは Aurora です",
    )
    assert memory.details == "今後、製品紹介を書くときはこのコードネームを使ってください"


def test_the_same_subject_updates_its_slot_and_another_subject_takes_the_next(world, consolidate):
    (first,) = consolidate(world.editor, "Remember that the Q3 launch deadline is Friday.")
    assert first.key == "deadline"
    (updated,) = consolidate(world.editor, "Remember that the q3  launch deadline is Monday")
    assert (updated.key, updated.version, updated.text) == ("deadline", 2, "The q3 launch deadline is Monday")
    keys = [
        m.key
        for m in consolidate(world.editor, "Remember that the audit deadline is in May. The tax deadline is in June.")
    ]
    assert keys == ["deadline", "deadline_2", "deadline_3"]
    (again,) = [
        m for m in consolidate(world.editor, "Remember that the audit deadline is in April.") if m.key == "deadline_2"
    ]
    assert (again.version, again.text) == (2, "The audit deadline is in April")


def test_a_topic_that_holds_one_thing_is_updated_by_every_new_memory(world, consolidate):
    consolidate(world.editor, "Remember that Zebramarker Logistics is my employer.")
    (employer,) = consolidate(world.editor, "Remember that Quillfeather Farms is my employer")
    assert (employer.key, employer.version, employer.text) == ("employer", 2, "Quillfeather Farms is my employer")


def test_an_expired_memory_keeps_its_slot_for_reactivation(world, consolidate):
    from datetime import timedelta

    from django.utils import timezone

    from retention import lifecycle

    (old,) = consolidate(world.editor, "Remember that the audit deadline is in May.")
    ask_history = world.workspace.ask_history
    assert ask_history.expired_grace_days >= 2
    MemoryVersion.objects.filter(pk=old.pk).update(
        retention_anchor=timezone.now() - timedelta(days=ask_history.agent_memory_retention_days + 1)
    )
    lifecycle.expiry_sweep()
    assert MemoryVersion.objects.get(pk=old.pk).state == "expired"
    keys = [m.key for m in consolidate(world.editor, "Remember that the tax deadline is in June.")]
    assert keys == ["deadline", "deadline_2"]  # the expired one is still `deadline`, offered for reactivation
    assert MemoryVersion.objects.get(pk=old.pk).valid_to is None


def test_a_topic_full_of_memories_drops_the_next(world, monkeypatch):
    grant(world.workspace, "100")
    agent = ai_agent(world)
    monkeypatch.setattr(topics, "MAX_SLOTS", 2)
    monkeypatch.setattr("memoryapp.consolidation.MAX_SLOTS", 2)
    use_stub(
        monkeypatch,
        StubModel(
            memories=[
                ExtractedMemory("fact", "customer", f"Customer {name} is on the Enterprise plan")
                for name in ("Acme", "Initech", "Globex")
            ]
        ),
    )
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hi"),
    )
    result = run_consolidation(submitted.consolidation.pk)
    assert (result["stored"], result["dropped"]) == (2, 1)
    assert sorted(MemoryVersion.objects.filter(member=world.editor).values_list("key", flat=True)) == [
        "customer",
        "customer_2",
    ]


# --- never the member's words ----------------------------------------------------------------------
def test_generated_requests_in_twelve_locales_get_vocabulary_topics_only():
    fake = Faker(list(LOCALES))
    fake.seed_instance(34)
    model = OfflineRulesModel(name="offline")
    checked = 0
    for n in range(240):
        locale = LOCALES[n % len(LOCALES)]
        words = " ".join(fake[locale].words(nb=3))
        other = fake[locale].word()
        for text in (
            f"Remember that {words} is important",
            f"I prefer {words}",
            f"覚えてください。{words}は大事です",
            f"Remember that the {words} deadline is {other}. The {other} codename is {words}.",
        ):
            for memory in model.extract(user_says(text)).memories:
                assert memory.topic in topics.VOCABULARY, (text, memory)
                assert not (words_of(memory.topic.replace("_", " ")) - VOCABULARY_WORDS), (text, memory.topic)
                checked += 1
    assert checked >= 900


def test_the_admin_shows_no_member_word_of_an_extracted_topic(world, consolidate, staff):
    consolidate(
        world.editor, "Remember that Zebramarker Logistics is my employer. The Quillfeather deadline is Friday."
    )
    consolidate(world.editor, "I prefer oat milk from Quillfeather farms.")
    keys = set(MemoryVersion.objects.filter(member=world.editor).values_list("key", flat=True))
    assert keys == {"employer", "deadline", "dietary_preference"}
    client = browser(staff.superuser)
    pages = [client.get(admin_url(MemoryVersion, "changelist")).content.decode()]
    export = client.get(admin_url(MemoryVersion, "export_csv"))
    pages.append(
        b"".join(export.streaming_content).decode() if hasattr(export, "streaming_content") else export.content.decode()
    )
    for version in MemoryVersion.objects.filter(member=world.editor):
        pages.append(client.get(admin_url(MemoryVersion, "change", version.pk)).content.decode())
    for page in pages:
        for word in ("Zebramarker", "zebramarker", "Quillfeather", "quillfeather", "oat_milk"):
            assert word not in page
    rows = list(csv.reader(io.StringIO(pages[1])))
    assert any(row and row[0].isdigit() for row in rows[1:])  # the export did list the memories


def test_a_models_topic_with_personal_data_is_refused_like_any_key(world, monkeypatch):
    grant(world.workspace, "100")
    agent = ai_agent(world)
    use_stub(
        monkeypatch,
        StubModel(
            memories=[
                ExtractedMemory("fact", "dana_at_example_dot_com", "Has an address"),
                ExtractedMemory("fact", "job_role", "Works as an engineer"),
            ]
        ),
    )
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c",
        anonymous=False,
        messages=user_says("hi"),
    )
    result = run_consolidation(submitted.consolidation.pk)
    assert (result["stored"], result["dropped"]) == (1, 1)
    assert list(MemoryVersion.objects.filter(member=world.editor).values_list("key", flat=True)) == ["job_role"]


TOPIC_WORD = st.from_regex(r"[a-z][a-z0-9]{2,11}", fullmatch=True)


@given(words=st.lists(TOPIC_WORD, min_size=1, max_size=4), kind=st.sampled_from(["fact", "preference", "instruction"]))
@hypothesis_settings(max_examples=300, deadline=None)
def test_a_models_topic_outside_the_vocabulary_becomes_the_generic_topic_of_its_kind(words, kind):
    """An LLM's topic is free text (it may name the member's employer): unless it is one of the
    vocabulary, it is stored under the generic topic of the memory's kind."""
    topic = "_".join(words)
    assume(topic not in topics.VOCABULARY)
    assert topics.vocabulary_topic(topic, kind) == topics.FALLBACK[kind]


def test_a_models_free_topic_is_stored_under_the_generic_topic_and_its_subject_updates(world, monkeypatch):
    grant(world.workspace, "100")
    agent = ai_agent(world)
    stub = use_stub(
        monkeypatch,
        StubModel(
            memories=[
                ExtractedMemory("fact", "zebramarker_logistics_employer", "Zebramarker Logistics is a freight firm")
            ]
        ),
    )
    for conversation, summary in (
        ("c1", "Zebramarker Logistics is a logistics firm"),
        ("c2", "Quillfeather Farms is a dairy"),
    ):
        submitted = submit_turn(
            workspace=world.workspace,
            member=world.editor,
            agent=agent,
            credential_id=None,
            conversation_id=conversation,
            anonymous=False,
            messages=user_says("hi"),
        )
        assert run_consolidation(submitted.consolidation.pk)["stored"] == 1
        stub.memories = [ExtractedMemory("fact", "zebramarker_logistics_employer", summary)]
    submitted = submit_turn(
        workspace=world.workspace,
        member=world.editor,
        agent=agent,
        credential_id=None,
        conversation_id="c3",
        anonymous=False,
        messages=user_says("hi"),
    )
    assert run_consolidation(submitted.consolidation.pk)["stored"] == 1
    rows = [
        (v.key, v.version, v.text)
        for v in MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).order_by("id")
    ]
    assert rows == [
        ("user_note", 1, "Zebramarker Logistics is a freight firm"),
        ("user_note", 2, "Zebramarker Logistics is a logistics firm"),
        ("user_note_2", 1, "Quillfeather Farms is a dairy"),
    ]


def test_the_vocabulary_is_english_snake_case_keys_the_key_check_accepts_and_the_prompt_names():
    assert len(topics.TOPICS) == len(topics.VOCABULARY)  # one definition per name
    for name in topics.VOCABULARY:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", name), name
        for number in (1, 2, topics.MAX_SLOTS):
            key = topics.slot_key(name, number)
            assert name_kinds(key) == () and len(key) <= 120, key
            assert topics.slot_number(key, name) == number
        assert name in SYSTEM_PROMPT
    assert set(topics.FALLBACK.values()) <= {t.name for t in topics.TOPICS if t.many}
    assert topics.slot_number("deadline_2c88669473", "deadline") is None  # an old digest key is no slot
    assert topics.slot_number("deadline_1", "deadline") is None


@given(st.text(min_size=1, max_size=200), st.sampled_from(["fact", "preference", "instruction"]))
@hypothesis_settings(max_examples=400, deadline=None)
def test_any_statement_is_placed_under_a_vocabulary_topic(text, kind):
    assert topics.classify(text, kind) in topics.VOCABULARY
    assert is_vocabulary_key(topics.slot_key(topics.classify(text, kind), 1))
