"""Consolidation's topics are keys the admin sees: no member words, no oracle (issue 22 review, D).

The offline system model named a free-form memory after what the member said: English subjects
became the key word for word ("Remember that Zebramarker Logistics is my employer" →
`zebramarker_logistics`), and other scripts a digest under one deployment-wide key, so equal texts
of two members showed equal keys to the admin (an oracle: whoever knows one member's note learns
who else wrote it). Decision (docs/privacy.md): a topic is a key (SPEC
§1, §10 let the admin see keys), so every extracted topic passes the key refusal of §4.1, and a
topic named after the member's words is a prefix and a digest keyed per workspace and member.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from faker import Faker
from hypothesis import assume, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from memoryapp.consolidation import run_consolidation, submit_turn
from memoryapp.masking import name_kinds
from memoryapp.models import ASSISTANT_NAMESPACE, MemoryVersion
from memoryapp.system_models import SUBJECT_PREFIXES, TOPIC_VOCABULARY, ExtractedMemory, OfflineRulesModel, topic_for
from tests.admin.support import admin_url, browser, staff  # noqa: F401
from tests.credits.support import StubModel, ai_agent, grant, use_stub, user_says

pytestmark = pytest.mark.django_db

FIXED = {"preferred_language", "spoken_languages", "job_role", "frequently_used_tools"}
LOCALES = ("en_US", "ja_JP", "he_IL", "fr_FR", "de_DE", "pt_BR", "es_ES", "it_IT", "zh_CN", "ko_KR", "ru_RU", "ar_AA")


@pytest.fixture
def consolidate(world):
    grant(world.workspace, "1000")
    agent = ai_agent(world)

    def run(member, text: str) -> list[MemoryVersion]:
        submitted = submit_turn(workspace=world.workspace, member=member, agent=agent, credential_id=None, conversation_id="c", anonymous=False, messages=user_says(text))
        assert submitted.consolidation.status == "queued", submitted.json()
        assert run_consolidation(submitted.consolidation.pk)["status"] == "done"
        return list(MemoryVersion.objects.filter(member=member, namespace=ASSISTANT_NAMESPACE, valid_to__isnull=True).order_by("id"))

    return run


def words_of(text: str) -> set[str]:
    return {w for w in re.findall(r"\w{3,}", text.casefold())}


def test_equal_subjects_of_two_members_show_unequal_keys(world, consolidate):
    text = "覚えてください。プロジェクトの締め切りは金曜日です"
    (editor_note,) = consolidate(world.editor, text)
    (viewer_note,) = consolidate(world.viewer, text)
    assert editor_note.text == viewer_note.text  # the same memory…
    assert editor_note.key != viewer_note.key  # …under keys that say nothing about it
    assert editor_note.key.startswith("user_note_") and viewer_note.key.startswith("user_note_")


def test_an_english_subject_is_no_key_and_still_updates_its_memory(world, consolidate):
    (first,) = consolidate(world.editor, "Remember that Zebramarker Logistics is my employer.")
    assert not words_of(first.key) & {"zebramarker", "logistics", "employer"}, first.key
    (second,) = consolidate(world.editor, "Remember that zebramarker  logistics is our biggest client")
    assert second.key == first.key and second.version == 2  # the same subject, normalised: one topic
    (prefers,) = [m for m in consolidate(world.editor, "I prefer oat milk from Quillfeather farms.") if m.key.startswith("prefers_")]
    assert not words_of(prefers.key) & {"oat", "milk", "quillfeather", "farms"}, prefers.key
    assert re.fullmatch(r"prefers_[0-9a-p]{10}", prefers.key)


def test_generated_subjects_in_twelve_locales_never_reach_a_key():
    fake = Faker(list(LOCALES))
    fake.seed_instance(22)
    model = OfflineRulesModel(name="offline")
    checked = 0
    for n in range(240):
        locale = LOCALES[n % len(LOCALES)]
        words = " ".join(fake[locale].words(nb=3))
        for text in (f"Remember that {words} is important", f"I prefer {words}", f"覚えてください。{words}は大事です"):
            for memory in model.extract(user_says(text)).memories:
                key = topic_for(memory, workspace_id=1, member_id=1)
                if key in FIXED:
                    continue
                assert re.fullmatch(r"(user_note|prefers)_[0-9a-p]{10}", key), (text, key)
                checked += 1
    assert checked >= 600


def test_the_admin_shows_no_member_word_of_an_extracted_topic(world, consolidate, staff):
    consolidate(world.editor, "Remember that Zebramarker Logistics is my employer.")
    consolidate(world.editor, "I prefer oat milk from Quillfeather farms.")
    client = browser(staff.superuser)
    pages = [client.get(admin_url(MemoryVersion, "changelist")).content.decode()]
    export = client.get(admin_url(MemoryVersion, "export_csv"))
    pages.append(b"".join(export.streaming_content).decode() if hasattr(export, "streaming_content") else export.content.decode())
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
    use_stub(monkeypatch, StubModel(memories=[ExtractedMemory("fact", "dana_at_example_dot_com", "Has an address"), ExtractedMemory("fact", "job_role", "Works as an engineer")]))
    submitted = submit_turn(workspace=world.workspace, member=world.editor, agent=agent, credential_id=None, conversation_id="c", anonymous=False, messages=user_says("hi"))
    result = run_consolidation(submitted.consolidation.pk)
    assert (result["stored"], result["dropped"]) == (1, 1)
    assert list(MemoryVersion.objects.filter(member=world.editor).values_list("key", flat=True)) == ["job_role"]


# --- a model's own topic (issue 22 review, F3) ------------------------------------------------------
TOPIC_WORD = st.from_regex(r"[a-z][a-z0-9]{2,11}", fullmatch=True)


@given(words=st.lists(TOPIC_WORD, min_size=1, max_size=4), member_id=st.integers(1, 10**6))
@hypothesis_settings(max_examples=300, deadline=None)
def test_a_models_topic_outside_the_vocabulary_carries_no_word_into_the_key(words, member_id):
    """An LLM's topic is free text (it may name the member's employer): unless it is one of the
    fixed vocabulary, no word of it reaches the key the admin sees, with or without a subject."""
    topic = "_".join(words)
    assume(topic not in TOPIC_VOCABULARY and topic not in SUBJECT_PREFIXES)
    for memory in (ExtractedMemory("fact", topic, "A fact"), ExtractedMemory("fact", topic, "A fact", subject="some subject")):
        key = topic_for(memory, workspace_id=1, member_id=member_id)
        assert re.fullmatch(r"(topic|user_note)_[0-9a-p]{10}", key), (topic, key)
        assert not {w for w in words if not w.isdigit()} & set(key.split("_")) - {"topic", "user", "note"}, (topic, key)
        assert key == topic_for(memory, workspace_id=1, member_id=member_id)  # stable: the same topic updates


def test_vocabulary_topics_stay_readable_and_digests_differ_per_member():
    for topic in sorted(TOPIC_VOCABULARY):
        assert topic_for(ExtractedMemory("fact", topic, "x"), workspace_id=1, member_id=1) == topic
    free = ExtractedMemory("fact", "zebramarker_logistics", "Works at a logistics firm")
    assert topic_for(free, workspace_id=1, member_id=1) != topic_for(free, workspace_id=1, member_id=2)


def test_a_models_free_topic_is_stored_as_a_digest_and_updates(world, monkeypatch):
    grant(world.workspace, "100")
    agent = ai_agent(world)
    stub = use_stub(monkeypatch, StubModel(memories=[ExtractedMemory("fact", "zebramarker_logistics_employer", "Works at a logistics firm")]))
    for conversation in ("c1", "c2"):
        submitted = submit_turn(workspace=world.workspace, member=world.editor, agent=agent, credential_id=None, conversation_id=conversation, anonymous=False, messages=user_says("hi"))
        assert run_consolidation(submitted.consolidation.pk)["stored"] == 1
        stub.memories = [ExtractedMemory("fact", "zebramarker_logistics_employer", "Works at a freight firm")]
    versions = list(MemoryVersion.objects.filter(member=world.editor, namespace=ASSISTANT_NAMESPACE).order_by("version"))
    assert [v.version for v in versions] == [1, 2] and len({v.key for v in versions}) == 1
    assert re.fullmatch(r"topic_[0-9a-p]{10}", versions[0].key) and "zebramarker" not in versions[0].key


@hypothesis_settings(max_examples=400, deadline=None)
@given(st.text(min_size=1, max_size=40), st.integers(min_value=1, max_value=10_000))
def test_a_digest_key_is_never_refused_as_a_number(subject, member_id):
    """~1.2% of 10-hex suffixes read as a phone or account number (all digits, a 9-digit run):
    the key check would refuse them and the extracted memory would be dropped."""
    for memory in (ExtractedMemory(kind="preference", topic="free words here", summary="x"), ExtractedMemory(kind="preference", topic="preference", summary="x", subject=subject)):
        key = topic_for(memory, workspace_id=1, member_id=member_id)
        assert name_kinds(key) == (), key


def test_digit_suffixes_are_spelled_as_letters_and_others_keep_their_form():
    from memoryapp.system_models import _digest_key

    assert _digest_key("topic", "1234567890abcdef") == "topic_hijklmnopg"
    assert _digest_key("topic", "ab12cd34ef5678") == "topic_ab12cd34ef"  # not a number: unchanged
