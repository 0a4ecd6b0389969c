"""How many identifier-shaped keys the personal-data check of names refuses (issue 34 row 3).

    .venv/bin/python bench/identifier_keys.py [--n 100000] [--seed 5]

Samples N keys of each shape (str(uuid4()), uuid4().hex, both upper-cased, a ULID, a lowercase
ULID, and a LangGraph-style "<prefix>:<uuid4>" key) from a seeded generator and prints how many
`masking.name_kinds` refuses now, and how many the check refused before identifiers were
recognised (each key read whole: the "before" column). No database needed.
"""

from __future__ import annotations

import argparse
import random
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryapp.masking import detect_kinds, name_kinds  # noqa: E402

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def shapes(rng: random.Random):
    def uuid4() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    def ulid() -> str:
        ms = rng.randrange(1_500_000_000_000, 2_000_000_000_000)
        head = "".join(CROCKFORD[(ms >> (5 * i)) & 31] for i in reversed(range(10)))
        return head + "".join(rng.choice(CROCKFORD) for _ in range(16))

    return {
        "str(uuid4())": lambda: str(uuid4()),
        "uuid4().hex": lambda: uuid4().hex,
        "str(uuid4()).upper()": lambda: str(uuid4()).upper(),
        "uuid4().hex.upper()": lambda: uuid4().hex.upper(),
        "ULID": ulid,
        "ULID lowercase": lambda: ulid().lower(),
        "memory:<uuid4>": lambda: f"memory:{uuid4()}",
    }


def whole_name_kinds(name: str) -> tuple[str, ...]:
    """The check before identifiers were recognised: the name read whole."""
    kinds = set(detect_kinds(name))
    if "_" in name:
        kinds.update(detect_kinds(name.replace("_", " ")))
    return tuple(sorted(kinds))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    print(f"{'shape':24} {'refused before':>16} {'refused now':>14}   (n = {args.n:,} each, seed {args.seed})")
    for name, make in shapes(random.Random(args.seed)).items():
        keys = [make() for _ in range(args.n)]
        before = sum(1 for k in keys if whole_name_kinds(k))
        now = sum(1 for k in keys if name_kinds(k))
        print(f"{name:24} {before:>7,} {100 * before / args.n:6.2f} % {now:>6,} {100 * now / args.n:5.2f} %")


if __name__ == "__main__":
    main()
