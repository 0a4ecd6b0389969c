"""What a workspace's knowledge entities cost (issue 22 review, hole A): a workspace with ~600
entities made each recall rebuild one regex per entity (recompiled once past `re`'s 512-pattern
cache), about 15 s a recall. Now one matcher per workspace and process, rebuilt only when the
workspace's entity generation (in the database, so every process sees it) moved; a matcher whose
work per text does not grow with the entity count; at most MAX_ENTITIES_PER_WORKSPACE entities;
and a recall that weighs at most QUERY_ENTITIES of the entities its query names.

The matcher must keep the rule it replaced (SPEC §5.1: case-insensitive, on word boundaries, a
substring in CJK text): hypothesis compares it with that rule, written here as it was — one
regex per entity — on generated names, aliases and texts.
"""

from __future__ import annotations

import re
import threading
import time
import unicodedata

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance import actions, knowledge
from governance.knowledge import EntityMatcher, matcher_for
from governance.models import Entity, Workspace
from memoryapp.recall import service
from tests.support import client_for, error_code, make_agent, on_postgres

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]")


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def reference_find(entities: list[tuple[int, str, list[str]]], text: str) -> set[int]:
    """The rule as main implemented it: one regex per entity over its forms."""
    found = set()
    for pk, name, aliases in entities:
        forms = [f for f in [name, *[a for a in aliases if a]] if f.strip() and _norm(f)]
        if not forms:
            continue
        pattern = "|".join(
            re.escape(_norm(f)) if _CJK.search(f) else rf"(?<!\w){re.escape(_norm(f))}(?!\w)" for f in forms
        )
        if re.search(pattern, _norm(text)):
            found.add(pk)
    return found


class Row:
    def __init__(self, pk: int, name: str, aliases: list[str]):
        self.pk, self.name, self.aliases = pk, name, aliases

    @property
    def surface_forms(self) -> list[str]:
        return [self.name, *[a for a in self.aliases if a]]


# Letters from several scripts, CJK, digits, look-alike widths, punctuation and spaces: the
# boundaries, the casefolding and the CJK substring rule all get exercised.
ALPHABET = st.sampled_from(list("abcAB C-_.'+#1２ｂＡßẞéÉ東京大阪倉庫アイウ한글שלום\u00a0\t!?İı"))
FORM = st.text(ALPHABET, min_size=1, max_size=8)
ENTITIES = st.lists(st.tuples(FORM, st.lists(FORM, max_size=3)), min_size=1, max_size=12)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ENTITIES, st.data())
def test_the_matcher_finds_exactly_what_one_regex_per_entity_found(entities, data):
    rows = [(i + 1, name, aliases) for i, (name, aliases) in enumerate(entities)]
    matcher = EntityMatcher([Row(*row) for row in rows])
    forms = [f for _, name, aliases in rows for f in [name, *aliases]]
    # texts built from the forms themselves (so matches happen), glued by boundary or word characters
    pieces = st.one_of(st.sampled_from(forms), st.text(ALPHABET, max_size=4))
    text = "".join(data.draw(st.lists(pieces, max_size=8)))
    assert matcher.find(text) == reference_find(rows, text)
    mentioned = matcher.mentions(text)
    assert sorted(mentioned) == sorted(reference_find(rows, text)) and len(set(mentioned)) == len(mentioned)
    if mentioned:
        assert matcher.mentions(text, limit=1) == mentioned[:1]


def test_mentions_come_in_the_order_of_their_first_mention():
    rows = [Row(1, "Zeta", []), Row(2, "Alpha", ["al"]), Row(3, "大阪", [])]
    assert EntityMatcher(rows).mentions("al met zeta in 大阪, then ALPHA") == [2, 1, 3]


# --- the cost of a recall ------------------------------------------------------------------------------
def _many_entities(workspace, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        actions.create_entity(workspace, name=f"Entity {i}", aliases=[f"alias-{i}", f"別名{i}"])


@pytest.mark.django_db
def test_recalls_share_one_matcher_until_the_entities_change(world, monkeypatch, settings):
    settings.MEMORY_EMBEDDER = "hashing"
    _many_entities(world.workspace, 600)
    agent = make_agent(world.editor)
    assert agent.remember(namespace="n", text="a note about shipping").status_code == 201
    builds = []
    original = EntityMatcher.__init__

    def counting(self, entities):
        builds.append(1)
        original(self, entities)

    monkeypatch.setattr(EntityMatcher, "__init__", counting)
    for i in range(5):
        assert agent.recall(query=f"what about Entity {i} and shipping").status_code == 200
    assert len(builds) <= 1, f"{len(builds)} matchers built for 5 recalls of an unchanged workspace"
    entity_table = Entity._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        assert agent.recall(query="Entity 7 shipping").status_code == 200
    assert not [q for q in queries.captured_queries if f'FROM "{entity_table}"' in q["sql"]], (
        "a cached recall read the entity table"
    )

    # A change (here through the action; the admin's save and delete send the same signal) is seen
    # by the next recall, by way of the counter in the database.
    before = Workspace.objects.get(pk=world.workspace.pk).entity_generation
    actions.create_entity(world.workspace, name="Freshly Added", aliases=[])
    assert Workspace.objects.get(pk=world.workspace.pk).entity_generation > before
    entity = Entity.objects.get(workspace=world.workspace, name="Freshly Added")
    assert entity.pk in matcher_for(world.workspace.pk).find("news about freshly added")
    entity.aliases = ["Renamed Alias"]
    entity.save()
    assert entity.pk in matcher_for(world.workspace.pk).find("renamed alias today")
    entity.delete()
    assert entity.pk not in matcher_for(world.workspace.pk).find("freshly added renamed alias")


@pytest.mark.django_db
def test_another_process_change_is_seen_by_the_counter_not_by_a_local_message(world):
    """What another process does reaches this one only through the database: a matcher cached
    here serves until the workspace's counter moves, whoever moved it."""
    actions.create_entity(world.workspace, name="Northwind", aliases=[])
    cached = matcher_for(world.workspace.pk)
    assert matcher_for(world.workspace.pk) is cached
    # another process renames the entity: its rows and its counter change, nothing in this process
    Entity.objects.filter(workspace=world.workspace).update(name="Southwind")
    assert matcher_for(world.workspace.pk) is cached  # no change of the counter: nothing to see yet
    Entity.changed(world.workspace.pk)
    fresh = matcher_for(world.workspace.pk)
    assert fresh is not cached and fresh.find("southwind") and not fresh.find("northwind")


def test_a_text_costs_the_same_lookups_whatever_the_entity_count(monkeypatch):
    """Work is counted, not timed: the slices a text is looked up by do not grow with the
    number of entities (one regex per entity did: one pass per entity)."""
    text = ("Entity 5 met alias-9 at the 別名3 office; " * 25)[:1000]

    def lookups(count: int) -> int:
        rows = [Row(i, f"Entity {i}", [f"alias-{i}", f"別名{i}"]) for i in range(count)]
        matcher = EntityMatcher(rows)
        calls = 0

        class Counting(dict):
            def get(self, key, default=None):
                nonlocal calls
                calls += 1
                return super().get(key, default)

        matcher._bounded, matcher._anywhere = Counting(matcher._bounded), Counting(matcher._anywhere)
        matcher.find(text)
        return calls

    assert lookups(2000) <= 4 * lookups(50)  # distinct form lengths grow by a digit or two, not 40x


@pytest.mark.django_db
def test_the_matcher_cache_keeps_within_its_budget(world, settings):
    settings.ENTITY_MATCHER_CACHE_FORMS = 10
    _many_entities(world.workspace, 3)  # 9 forms
    actions.create_entity(world.other_workspace, name="Other", aliases=["Other Two", "Other Three"])
    matcher_for(world.workspace.pk)
    matcher_for(world.other_workspace.pk)
    assert world.workspace.pk not in knowledge._matchers and world.other_workspace.pk in knowledge._matchers


# --- the cap -------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_entities_past_the_cap_are_refused_with_a_clear_code(world, settings):
    settings.MAX_ENTITIES_PER_WORKSPACE = 3
    owner = client_for(world.owner)
    url = f"/api/w/{world.workspace.pk}/entities"
    for i in range(3):
        assert owner.post(url, {"name": f"E{i}"}, format="json").status_code == 201
    refused = owner.post(url, {"name": "one too many"}, format="json")
    assert refused.status_code == 409 and error_code(refused) == "ENTITY_LIMIT_REACHED"
    assert refused.json()["error"]["details"] == {"limit": 3}
    assert Entity.objects.filter(workspace=world.workspace).count() == 3
    # the cap is per workspace
    assert (
        client_for(world.outsider)
        .post(f"/api/w/{world.other_workspace.pk}/entities", {"name": "E"}, format="json")
        .status_code
        == 201
    )


@pytest.mark.django_db
def test_names_and_aliases_past_their_cap_are_refused_too(world, settings):
    """A matcher's build (once per process and change) grows with the forms, not the entities."""
    settings.MAX_ENTITY_FORMS_PER_WORKSPACE = 10
    owner = client_for(world.owner)
    url = f"/api/w/{world.workspace.pk}/entities"
    assert owner.post(url, {"name": "A", "aliases": ["a1", "a2", "a3"]}, format="json").status_code == 201  # 4 forms
    assert (
        owner.post(url, {"name": "B", "aliases": ["b1", "b2", "b3", "b4", "b5"]}, format="json").status_code == 201
    )  # 10
    refused = owner.post(url, {"name": "C"}, format="json")
    assert refused.status_code == 409 and error_code(refused) == "ENTITY_LIMIT_REACHED"
    assert refused.json()["error"]["details"] == {"formsLimit": 10}
    assert Entity.objects.filter(workspace=world.workspace).surface_form_count() == 10


def test_threads_of_one_process_build_a_workspace_matcher_once(monkeypatch, db, world):
    actions.create_entity(world.workspace, name="Shared", aliases=[])
    version = Workspace.objects.get(pk=world.workspace.pk).entity_version
    knowledge._matchers.pop(world.workspace.pk, None)
    builds, arrived = [], []

    def build(cls, workspace_id):
        builds.append(workspace_id)
        for _ in range(3000):  # until every thread asked (each then finds no matcher and waits)
            if len(arrived) == 4:
                break
            time.sleep(0.001)
        time.sleep(0.05)
        return cls([])  # no query: the threads share no database connection here

    monkeypatch.setattr(EntityMatcher, "for_workspace", classmethod(build))
    results = []

    def ask():
        arrived.append(1)
        results.append(matcher_for(world.workspace.pk, version))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(builds) == 1 and len({id(m) for m in results}) == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(not on_postgres(), reason="backend: row locks and real concurrency need PostgreSQL")
def test_the_cap_is_exact_under_concurrent_creation(world, settings):
    settings.MAX_ENTITIES_PER_WORKSPACE = 5
    _many_entities(world.workspace, 3)
    barrier = threading.Barrier(8, timeout=60)
    outcomes: list[str] = []

    def create(i: int) -> None:
        try:
            barrier.wait()
            actions.create_entity(world.workspace, name=f"Racer {i}", aliases=[])
            outcomes.append("created")
        except Exception as exc:  # noqa: BLE001 - the code is what the test reads
            outcomes.append(getattr(exc, "code", type(exc).__name__))
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["ENTITY_LIMIT_REACHED"] * 6 + ["created"] * 2
    assert Entity.objects.filter(workspace=world.workspace).count() == 5


# --- the bounded ranking -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_query_weighs_at_most_its_first_query_entities(world, settings):
    settings.MEMORY_EMBEDDER = "hashing"
    count = service.QUERY_ENTITIES + 8
    _many_entities(world.workspace, count)
    collection = actions.create_collection(world.workspace, name="kb")
    document = actions.create_document(collection, title="t", text=f"Entity 0 is first.\n\nEntity {count - 1} is last.")
    first, last = document.current_version.passages.order_by("position")
    agent = make_agent(world.editor)
    cites_first = agent.remember(namespace="n", text="note one", citations=[str(first.pk)]).json()["memory"]["id"]
    cites_last = agent.remember(namespace="n", text="note two", citations=[str(last.pk)]).json()["memory"]["id"]
    query = " ".join(f"Entity {i}" for i in range(count))[:1000]
    ranks = {m["id"]: m["ranks"]["entity"] for m in agent.recall(query=query).json()["memories"]}
    assert ranks.get(cites_first) == 1
    assert ranks.get(cites_last) is None  # named past the first QUERY_ENTITIES: not weighed
