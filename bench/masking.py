"""Masking cost: p50/p95 per text size on realistic text, and the worst adversarial input found
for each detector (issue 13 §6). No database needed.

    .venv/bin/python bench/masking.py [--repeat 30]

Prints, per size, p50/p95 of mask() on sentences mixing personal data and ordinary numbers; then
each adversarial family at 8,000 characters (the largest message) and at MAX_MASKED_CHARS (the
most one request may mask), with the cost per 1,000 characters, and the worst case overall.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryapp.masking import MAX_MASKED_CHARS, mask  # noqa: E402

REALISTIC = [
    "Met Dana at the cafe on 2024-05-01; she said to email dana.levi@example.com or call +972 54-123-4567.",
    "明日は10時から会議です。電話は090-1234-5678、メールはtaro@example.co.jpです。",
    "Card 4111 1111 1111 1111, version 3.11.7, order #12345, price $1,299.99.",
    "my password is swordfish and the GITHUB_TOKEN=ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "הפגישה נדחתה ליום ראשון, טלפון 03-1234567, ת.ז. 039337423.",
    "Flight LH 401 at 14:05, room 1204, IBAN DE89 3704 0044 0532 0130 00.",
    "She prefers tea, likes hiking, and works on the Osaka warehouse project.",
]


def realistic(size: int, rng: random.Random) -> str:
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < size:
        parts.append(rng.choice(REALISTIC))
    return " ".join(parts)[:size]


def adversarial(rng: random.Random) -> dict[str, callable]:
    digits = string.digits

    def rep(unit: str):
        return lambda n: (unit * (n // len(unit) + 1))[:n]

    def gen(fn):
        return lambda n: fn(n)[:n]

    return {
        "digit groups 1-4, single spaces": gen(lambda n: " ".join(str(rng.randint(0, 9999)) for _ in range(n // 3))),
        "digit groups of 6 (no NUMBER cover)": gen(
            lambda n: " ".join("".join(rng.choice(digits) for _ in range(6)) for _ in range(n // 6))
        ),
        "digit groups of 6-9 with dashes": gen(
            lambda n: " ".join(
                "-".join("".join(rng.choice(digits) for _ in range(rng.randint(6, 9))) for _ in range(2))
                for _ in range(n // 10)
            )
        ),
        "dates and phones interleaved": gen(
            lambda n: " ".join(
                rng.choice(["2024-05-01", "054-123-4567", "10:30", "1/2/2024", "+44 20 7946 0958"])
                for _ in range(n // 8)
            )
        ),
        "one long digit run": rep("0123456789"),
        "parenthesised digits": rep("(1) "),
        "plus signs and digits": rep("+1 "),
        "'@' spam": rep("a@"),
        "local part without '@'": rep("a.b"),
        "e-mail-like labels": rep("a@b.c."),
        "password: spam": rep("password: "),
        "password is spam": rep("password is "),
        "key=value spam": rep("api_key=x;"),
        "'://' spam": rep("://a:"),
        "'//' spam (npm's pattern)": rep("//a"),
        "'eyJ' spam (JWT pattern)": rep("eyJ"),
        "'sk-' spam (OpenAI pattern)": rep("sk-a"),
        "Slack-like prefixes in one token": rep("xoxb-1-"),
        "aws label spam": rep("awskey'"),
        "private key headers": rep("-----BEGIN RSA PRIVATE KEY-----\n"),
        "xml-ish tags": rep("<password>a</pass>"),
        "base64 blob": gen(lambda n: "".join(rng.choice(string.ascii_letters + digits + "+/") for _ in range(n))),
        "invisible chars between digits": rep("0\u200b"),
        "full-width digits and dashes": rep("０９０－"),
        "Japanese with particles": rep("パスワードは「"),
        "cards with dots": rep("4111.1111."),
        "IBAN-like": rep("DE89 3704 "),
        "account words and digits": rep("account 12 "),
        "phone words and digits": rep("call 12 "),
        # issue 22's detectors
        "digit groups of 6 joined by ', '": rep("123456, "),
        "digit groups of 6 joined by ','": rep("123456,"),
        "digits around a placeholder": rep("[PHONE] 12 "),
        "spelled 'at' spam": rep("x at "),
        "spelled e-mail chains": rep("a dot b at c dot "),
        "spaced '@' spam": rep("a @ b."),
        "quoted local parts": rep('"a"@'),
        "bracketed at/dot": rep("a[at]b[.]"),
        "Japanese アット/ドット": rep("aアットbドット"),
        "command words and -p": rep("mysql -p "),
        "'-u user:pass' spam": rep("-u a:b "),
        "'-U user%pass' spam": rep("-U a%b "),
        "German password connector": rep("passwort ist "),
        "Spanish qualifier spam": rep("x,contraseña del wifi"),
        "Chinese/Korean labels": rep("密码是비밀번호는 "),
        "phone words of 12 languages": rep("Telefon unter zadzwoń pod 电话 "),
        "random printable": gen(lambda n: "".join(rng.choice(string.printable) for _ in range(n))),
    }


def timed(text: str, repeat: int) -> list[float]:
    mask(text)  # warm-up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        mask(text)
        samples.append((time.perf_counter() - start) * 1000)
    return sorted(samples)


def pct(samples: list[float], q: float) -> float:
    return samples[min(len(samples) - 1, int(round(q / 100 * (len(samples) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(6)

    print("realistic text (personal data and ordinary numbers mixed)")
    for size in (100, 1_000, 8_000, MAX_MASKED_CHARS):
        samples = timed(realistic(size, rng), args.repeat if size <= 8_000 else max(3, args.repeat // 5))
        print(f"  {size:>6} chars   p50 {pct(samples, 50):8.2f} ms   p95 {pct(samples, 95):8.2f} ms")

    print(
        f"\nadversarial inputs (median of {max(3, args.repeat // 5)}), at 8,000 chars and at {MAX_MASKED_CHARS:,} chars"
    )
    worst = ("", 0.0)
    for name, make in adversarial(rng).items():
        row = []
        for size in (8_000, MAX_MASKED_CHARS):
            samples = timed(make(size), max(3, args.repeat // 5))
            median = pct(samples, 50)
            row.append(median)
            if median > worst[1]:
                worst = (f"{name} at {size:,} chars", median)
        print(
            f"  {name:<40} {row[0]:8.2f} ms   {row[1]:8.2f} ms   ({row[1] / MAX_MASKED_CHARS * 1000:.2f} ms per "
            "1,000 chars)"
        )
    print(f"\nworst adversarial case: {worst[0]}: {worst[1]:.1f} ms")


if __name__ == "__main__":
    main()
