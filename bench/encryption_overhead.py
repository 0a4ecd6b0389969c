"""What envelope encryption costs remember and recall (SPEC §8.2, issue 24's targets), on PostgreSQL,
encryption on and off in the same run.

    .venv/bin/python bench/encryption_overhead.py [--others 1000000] [--versions 5000] [--n 200] [--rounds 4]

One workspace's two members hold --versions versions each among --others rows of other members
(`recall_latency.populate_others`): one member's written with encryption on, the other's with it
off; the last --n of each are the measured remembers, so recall is measured at --versions (the
product's per-member cap is 5,000). "Off" is this benchmark's own switch, never the product's: inside `encryption_off()`
the
sealing module's seal and open are the identity, its key store stores nothing and answers a dummy
key for every id without a query (and a new row's key is made up, not taken from the spares), so a row is written and
read as plaintext bytes — what the
product did before SPEC §8.2. Remember and recall are measured as agents run them (the actions
behind the agent API: `memoryapp.actions.remember`, `memoryapp.reads.recall_memories`), on and off
alternating in --rounds blocks (remembers, then recalls), so the shared machine's load drifts into both alike. Targets:
remember p95 +<= 1.5 ms, recall p95 +<= 15 %.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
import uuid
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(__file__))
from _setup import pct, setup, summary  # noqa: E402


class _PlainCipher:
    """The "cipher" of a key while encryption is off: the digest is a plain SHA-256, as before SPEC §8.2."""

    def digest(self, text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


_PLAIN = _PlainCipher()


class _NoKeyStore:
    """The key store while encryption is off: stores nothing, answers every id at once."""

    def put(self, keys, *, owner):
        return None

    def get_many(self, key_ids):
        return dict.fromkeys(key_ids, b"\0" * 32)


@contextmanager
def encryption_off():
    from memoryapp import sealing

    saved = {
        name: getattr(sealing, name) for name in ("seal", "open_sealed", "key_store", "new_row_key", "DataKeyCipher")
    }
    store = _NoKeyStore()
    sealing.new_row_key = lambda owner: (uuid.uuid4(), b"\0" * 32)  # no spare taken, nothing stored
    sealing.seal = lambda cipher, data, aad: data
    sealing.open_sealed = lambda cipher, data, aad: data
    sealing.key_store = lambda: store
    sealing.DataKeyCipher = lambda key: _PLAIN
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(sealing, name, value)


@contextmanager
def encryption_on():
    yield


def measure(fn, switch, repeat: int, warmup: int = 3) -> list[float]:
    with switch():
        for _ in range(warmup):
            fn()
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--others", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=5000)
    parser.add_argument("--n", type=int, default=200, help="samples per figure (split over the rounds)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--db", default="bench_encryption", help="PostgreSQL database to (re)create")
    args = parser.parse_args()
    if args.n % args.rounds or args.n >= args.versions or args.n // args.rounds > 110:
        parser.error(
            "--n must be a multiple of --rounds, below --versions, and at most 110 per round (the hourly "
            "remember budget)"
        )
    setup(args.db, redis_db=int(os.environ.get("BENCH_REDIS_DB", "9")))
    from django.conf import settings
    from django.db import connection
    from recall_latency import QUERIES, populate_member, populate_others

    from governance import actions
    from memoryapp import gates
    from memoryapp.actions import remember
    from memoryapp.models import MemoryVersion
    from memoryapp.ratelimit import get_limiter
    from memoryapp.reads import recall_memories

    rng = random.Random(7)
    started = time.perf_counter()
    populate_others(args.others)
    built_others = time.perf_counter() - started
    workspace, owner = actions.create_workspace("Bench", owner_email="bench-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    members = {}
    for label, switch in (("on", encryption_on), ("off", encryption_off)):
        member = actions.add_member(workspace, f"enc-{label}@x.test", role="editor")
        with switch():
            populate_member(member, workspace, args.versions - args.n, rng)
        credential, token = actions.create_credential(member, name="bench", scopes=["memory:read", "memory:write"])
        members[label] = (member, credential, token, switch)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    sealed = MemoryVersion.objects.filter(member=members["on"][0]).exclude(key_id=None).count()
    print(
        f"{MemoryVersion.objects.count():,} memory versions stored ({built_others:.0f} s for the others, "
        f"{time.perf_counter() - started:.0f} s in all); {args.versions - args.n:,} per measured member before its "
        f"{args.n} remembers ({sealed:,} sealed for 'on'); embedder {settings.MEMORY_EMBEDDER}; PostgreSQL"
    )

    limiter = get_limiter()
    counter = iter(range(10**9))
    queries = iter(QUERIES * 100_000)

    def do_remember(label: str):
        token = members[label][2]
        i = next(counter)
        remember(
            gates.admit(
                token,
                "remember",
                {
                    "namespace": "bench",
                    "text": f"Note {i}: prefers aisle seats and tea in the {rng.choice(['morning', 'evening'])}",
                },
            )
        )

    def do_recall(label: str):
        token = members[label][2]
        answer = recall_memories(gates.admit(token, "recall", {"query": next(queries)}), surface="rest")
        assert answer.body["memories"], "a recall found nothing: the switch is broken"

    samples: dict[tuple[str, str], list[float]] = {
        (op, label): [] for op in ("recall", "remember") for label in ("on", "off")
    }
    per_round = args.n // args.rounds
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    # Remembers first (each adds a version: the members reach --versions with the last of them,
    # the product's cap), then recalls at exactly --versions.
    for op, fn in (("remember", do_remember), ("recall", do_recall)):
        for round_ in range(args.rounds):
            for label in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
                limiter.reset(members[label][1].pk)  # measure the path, not the hourly budgets (untimed)
                samples[(op, label)] += measure(
                    lambda label=label, fn=fn: fn(label),
                    members[label][3],
                    per_round,
                    warmup=0 if op == "remember" else 3,
                )
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for op in ("remember", "recall"):
        for label in ("off", "on"):
            print(summary(f"{op}, encryption {label} ({args.versions:,} versions)", samples[(op, label)]))
    remember_delta = pct(samples[("remember", "on")], 95) - pct(samples[("remember", "off")], 95)
    recall_delta = pct(samples[("recall", "on")], 95) / pct(samples[("recall", "off")], 95) - 1
    print(
        f"{'remember p95: on - off':<48} {remember_delta:+7.2f} ms   target <= +1.50 ms   "
        f"{'met' if remember_delta <= 1.5 else 'NOT MET'}"
    )
    print(
        f"{'recall p95: on / off - 1':<48} {recall_delta * 100:+7.1f} %    target <= +15.0 %    "
        f"{'met' if recall_delta <= 0.15 else 'NOT MET'}"
    )
    for op in ("remember", "recall"):
        on, off = samples[(op, "on")], samples[(op, "off")]
        print(f"{f'  {op} p50: on - off':<48} {pct(on, 50) - pct(off, 50):+7.2f} ms")


if __name__ == "__main__":
    main()
