"""Recall's own read path (issue 32: binary rows on PostgreSQL, only the results converted, the
index entries opened in one pass) answers exactly what the ORM's reads would: the same rows, the
same values down to the time zone object, the same rankings, scores and answer, on generated
data; and one row that does not open leaves the others of its batch alone."""

from __future__ import annotations

import random
import uuid

import pytest

from governance import actions
from memoryapp import crypto, gates, sealing
from memoryapp.models import MemoryEmbedding, MemoryVersion
from memoryapp.recall import service
from memoryapp.recall.embedders import PendingQuery, get_embedder
from memoryapp.recall.fusion import rrf
from memoryapp.representation import memory_json
from memoryapp.visibility import filtered_versions, recheck
from tests.support import make_agent

WORDS = (
    "shipping warehouse invoice osaka tokyo seat aisle window coffee tea budget report review deadline release "
    "vim emacs python rust 大阪 倉庫 出荷"
).split()
QUERIES = [
    "shipping deadline from osaka",
    "aisle or window seat",
    "coffee budget review",
    "大阪の倉庫",
    "which editor, vim or emacs",
    "nothing matches zebra",
]


def generated_memories(agent, docs, rng: random.Random, count: int = 60) -> None:
    collection, _, passages = docs
    for i in range(count):
        body = {
            "namespace": rng.choice(["prefs", "work", "travel"]),
            "text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14))),
        }
        if i % 4 == 0:
            body["key"] = f"k{i}"
        if i % 5 == 0:
            body["text"] += f" mail ops{i}@example.com"  # masked: masked_kinds is not empty
        if i % 6 == 0:
            body["kind"], body["details"] = "fact", [f"detail {i}", "second line"]
        if i % 7 == 0:
            body["citations"] = [str(rng.choice(passages).pk)]
        if i % 9 == 0:
            body["collectionId"] = str(collection.pk)
        response = agent.remember(**body)
        assert response.status_code == 201, response.json()


def reference_answer(admission: gates.Admission) -> dict:
    """recall() computed from the ORM's own reads: the rows and their index entries loaded and
    opened by the models' QuerySets, nothing of recall's read path."""
    ctx, data = admission.ctx, admission.data
    versions = list(filtered_versions(admission)[: service.CANDIDATES])
    entries = {e.memory_id: e for e in MemoryEmbedding.objects.filter(memory_id__in=[v.pk for v in versions])}
    cites = {v.pk for v in versions if v.citations.exists()}
    candidates = []
    for v in versions:
        entry = entries.get(v.pk)
        candidate = service.Candidate(
            v.pk, v.collection_id, v.key_id, (v.workspace_id, v.member_id), cites=v.pk in cites
        )
        if entry is not None:
            candidate.embedder_id, candidate.dim, candidate.vector, candidate.terms = (
                entry.embedder_id,
                entry.dim,
                bytes(entry.vector),
                entry.terms.split(),
            )
        candidates.append(candidate)
    checked = recheck(candidates, ctx.member, cites=cites)
    visible = checked.visible
    pending = PendingQuery(get_embedder("hashing"), data["query"])
    rankings, degraded = service.rank_candidates(
        data["query"], visible, checked, ctx.workspace.pk, pending, ctx.workspace.entity_version
    )
    by_pk = {v.pk: v for v in versions}
    memories = []
    for index, (score, ranks) in list(rrf(rankings, k=service.RRF_K).items())[: data["limit"]]:
        memory = memory_json(by_pk[visible[index].pk], checked, ctx.ask_history)
        memory["score"] = score
        memory["ranks"] = {name: ranks.get(name) for name in ("bm25", "semantic", "entity")}
        memories.append(memory)
    return {"memories": memories, "hidden": checked.hidden, "considered": len(visible), "degraded": degraded}


@pytest.mark.parametrize("seed", [7, 32])
def test_recall_answers_what_the_orms_own_reads_would(world, docs, settings, seed):
    settings.MEMORY_EMBEDDER = "hashing"
    agent = make_agent(world.editor)
    generated_memories(agent, docs, random.Random(seed))
    _, token = actions.create_credential(world.editor, name="reader", scopes=["memory:read"])
    compared = 0
    for query in QUERIES:
        for body in (
            {"query": query, "limit": 50},
            {"query": query, "namespace": "work"},
            {"query": query, "collectionId": str(docs[0].pk)},
        ):
            answer = service.recall(gates.admit(token, "recall", body))
            assert answer == reference_answer(gates.admit(token, "recall", body)), body
            compared += len(answer["memories"])
    assert compared > 100  # the comparison covered real answers, not empty ones


def test_a_result_row_is_the_row_the_orm_reads(world, docs, settings):
    settings.MEMORY_EMBEDDER = "hashing"
    agent = make_agent(world.editor)
    generated_memories(agent, docs, random.Random(1), count=30)
    _, token = actions.create_credential(world.editor, name="reader", scopes=["memory:read"])
    fetched = service.recall_candidates(gates.admit(token, "recall", {"query": "osaka"}))
    shown = service.result_versions(list(fetched), fetched)
    assert len(shown) == 30
    for pk, version in shown.items():
        orm = MemoryVersion.objects.get(pk=pk)
        fields = [f.attname for f in MemoryVersion._meta.concrete_fields]
        # repr: a datetime's tzinfo object (Django's, not the session's ZoneInfo), str vs bytes, list vs text all show
        assert {name: repr(getattr(version, name)) for name in fields} == {
            name: repr(getattr(orm, name)) for name in fields
        }
        assert version.text == orm.text and version.masked_kinds == orm.masked_kinds


def test_one_index_entry_that_does_not_open_leaves_the_others_of_its_batch_alone():
    table_owner = (1, 2)
    keys: dict = {}
    rows, expected = [], []
    rng = random.Random(5)

    def sealed(key_id, cipher, owner, name, data):
        return crypto.seal(cipher, data, crypto.field_aad(MemoryEmbedding._meta.db_table, owner, key_id, name))

    for i in range(40):
        key_id, cipher = uuid.uuid4(), crypto.DataKeyCipher(crypto.new_data_key())
        vector, terms = rng.randbytes(16), f"term{i} shared".encode()
        values = (
            sealed(key_id, cipher, table_owner, "vector", vector),
            sealed(key_id, cipher, table_owner, "terms", terms),
        )
        keys[key_id] = cipher
        case = i % 8
        owner = table_owner
        if case == 1:
            del keys[key_id]  # destroyed by an erase
            expected.append(sealing.MISSING_KEY)
        elif case == 2:
            keys[key_id] = None  # stored, does not unwrap
            expected.append(sealing.BAD_KEY)
        elif case == 3:
            values = (values[0][:-1] + bytes([values[0][-1] ^ 1]), values[1])  # corrupted
            expected.append(sealing.CORRUPT)
        elif case == 4:
            values = (values[1], values[0])  # swapped between fields
            expected.append(sealing.CORRUPT)
        elif case == 5:
            owner = (1, 3)  # re-owned by an UPDATE
            expected.append(sealing.CORRUPT)
        elif case == 6:
            key_id, values = None, (vector, terms)  # stored before encryption
            expected.append((vector, terms.decode()))
        elif case == 7:
            key_id = None  # a key id stripped from a sealed row
            expected.append(sealing.CORRUPT)
        else:
            expected.append((vector, terms.decode()))
        rows.append((key_id, owner, values))
    answers = sealing.open_rows(MemoryEmbedding, rows, ("vector", "terms"), keys)
    assert [a.reason if isinstance(a, sealing.Unreadable) else a for a in answers] == expected
    for (key_id, owner, values), answer in zip(rows, answers):  # the one-row form agrees row by row
        try:
            single = tuple(
                sealing.open_values(
                    MemoryEmbedding, key_id, owner, keys, {"vector": values[0], "terms": values[1]}
                ).values()
            )
        except sealing.Unreadable as exc:
            single = exc.reason
        assert single == (answer.reason if isinstance(answer, sealing.Unreadable) else answer)
