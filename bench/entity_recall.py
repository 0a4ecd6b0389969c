"""What a workspace's knowledge entities cost a recall and an ingestion, on PostgreSQL.

    .venv/bin/python bench/entity_recall.py [--entities 600 2000] [--n 30] [--db bench_entities]

For each entity count: a workspace with that many entities (two shapes: "typical", a name and
3 short aliases; "widest", a name and 50 aliases of 200 characters, the most EntityBody allows),
one member with 300 memories citing passages that mention them. Prints, per shape and count:

- the matcher's cold build (what a process pays once per entity change) and one `find` on a
  1,000-character query (what each recall pays with the matcher cached),
- recall p50/p95 in-process (hashing embedder, so the entity side is what is measured), with a
  query naming a few entities, with the worst query we could write (1,000 characters that start a
  word at every position and name many entities), and with one naming none (the rest of a
  recall: the baseline of the same run),
- ingesting one 20,000-character document (linking its passages to every entity).

Run it before and after a change to compare; the load average is printed because the machine is
shared. (On main before issue 22's entity fix, the matcher was rebuilt on every recall: one
regex per entity, recompiled once the count passed `re`'s 512-pattern cache.)"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

os.environ.setdefault("MEMORY_EMBEDDER", "hashing")

from _setup import pct, setup, timed  # noqa: E402

WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliett "
    "kilo lima mike november oscar papa quebec romeo sierra tango"
).split()


def entity_forms(rng: random.Random, i: int, shape: str) -> tuple[str, list[str]]:
    name = f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {i}"
    if shape == "typical":
        return name, [f"{w}{i}" for w in rng.sample(WORDS, 3)]
    return name, [(f"{w} {i} " * 40)[:199].strip() + f" {k}" for k, w in enumerate(rng.choices(WORDS, k=50))]


def build(count: int, shape: str, rng: random.Random):
    from core.errors import ApiError
    from governance import actions
    from memoryapp import gates
    from memoryapp.actions import store_version

    workspace, owner = actions.create_workspace(
        f"Entities {shape} {count}", owner_email=f"owner-{shape}-{count}@bench.test"
    )
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    member = actions.add_member(workspace, f"m-{shape}-{count}@bench.test", role="editor")
    collection = actions.create_collection(workspace, name="kb")
    names = []
    started = time.perf_counter()
    refused = None
    for i in range(count):
        name, aliases = entity_forms(rng, i, shape)
        try:
            actions.create_entity(workspace, name=name, aliases=aliases)
        except (
            ApiError
        ) as exc:  # a cap (MAX_ENTITIES_PER_WORKSPACE, MAX_ENTITY_FORMS_PER_WORKSPACE): measure what was allowed
            refused = exc.code
            break
        names.append(name)
    created = time.perf_counter() - started
    count = len(names)
    text = "\n\n".join(
        f"{names[i % count]} met {names[(i * 7) % count]} about {rng.choice(WORDS)}." for i in range(300)
    )
    document = actions.create_document(collection, title="facts", text=text)
    passages = list(document.current_version.passages.order_by("position"))
    for i in range(300):
        store_version(
            workspace=workspace,
            member=member,
            credential=None,
            namespace="kb",
            key=None,
            content=gates.mask_content(f"note {i} about {rng.choice(WORDS)}", []),
            kind="",
            source="agent",
            collection_id=None,
            passages=[passages[i % len(passages)]],
        )
    token = actions.create_credential(member, name="bench", scopes=["memory:read"])[1]
    return workspace, collection, names, token, created, refused


def measure(shape: str, count: int, n: int, rng: random.Random) -> str:
    from governance import actions, knowledge
    from memoryapp import gates
    from memoryapp.recall.service import recall

    workspace, collection, names, token, created, refused = build(count, shape, rng)
    asked, count = count, len(names)
    typical_query = f"what did {names[3]} tell {names[count // 2]} about alpha"
    worst_query = ("!" * 200 + " ".join(names))[:1000]
    cached = hasattr(knowledge, "matcher_for")
    started = time.perf_counter()
    matcher = knowledge.EntityMatcher.for_workspace(workspace.pk)
    cold = (time.perf_counter() - started) * 1000
    finds = timed(lambda: matcher.find(worst_query), n, warmup=2)
    typical = timed(lambda: recall(gates.admit(token, "recall", {"query": typical_query})), n, warmup=2)
    worst = timed(lambda: recall(gates.admit(token, "recall", {"query": worst_query})), n, warmup=2)
    plain = timed(
        lambda: recall(gates.admit(token, "recall", {"query": "what about the weather tomorrow"})), n, warmup=2
    )
    doc_text = "\n\n".join(f"{rng.choice(names)} and {rng.choice(names)} {rng.choice(WORDS)}" for _ in range(600))[
        :20000
    ]
    ingest = timed(lambda: actions.create_document(collection, title="more", text=doc_text), 3, warmup=0)
    return (
        f"{shape:>8} {count:>5} entities{f' (of {asked}: {refused})' if refused else ''} (created in {created:6.1f} "
        f"s): matcher build {cold:8.1f} ms, find(worst 1,000 chars) p50 {pct(finds, 50):7.2f} ms; recall p50/p95 "
        f"typical {pct(typical, 50):8.1f}/{pct(typical, 95):8.1f} ms, worst "
        f"{pct(worst, 50):8.1f}/{pct(worst, 95):8.1f} ms, naming no entity "
        f"{pct(plain, 50):8.1f}/{pct(plain, 95):8.1f} ms; ingest 20k chars p50 {pct(ingest, 50):8.1f} "
        f"ms{'' if cached else '  [matcher rebuilt per recall]'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entities", type=int, nargs="+", default=[600, 2000])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--db", default="bench_entities")
    args = parser.parse_args()
    setup(args.db)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    rng = random.Random(22)
    for shape in ("typical", "widest"):
        for count in args.entities:
            print(measure(shape, count, args.n, rng), flush=True)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
