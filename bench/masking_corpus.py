"""Masking on generated personal data and on everyday text (issue 22 §4). No database needed.

    .venv/bin/python bench/masking_corpus.py [--per-form 60] [--show 10]
    .venv/bin/python bench/masking_corpus.py --write-everyday   # regenerate tests/data/everyday_sentences.txt

Prints:

1. the forms corpus (tests/masking/forms_corpus.py: Faker values in 12 locales in every form the issue
   found stored in clear): values per form and locale, survivors, and the kinds they became;
2. the everyday corpus (tests/masking/everyday_corpus.py): sentences per source, how many mask() changes,
   each changed sentence with what it became, and the share against the 1-in-1,000 budget;
3. the worst time of mask() over hostile inputs built from the new detectors' pieces at
   MAX_MASKED_CHARS characters (random mixes; bench/masking.py times each family alone);
4. issue 33: the catalogue corpus (tests/masking/catalogue_corpus.py: national identifiers
   python-stdnum validates, SSNs after a label, e-mails spelled in Japanese, digit groups joined
   by ", ", mobiles without a phone word; 30 locales, 8 forms, 10,000+ values) with survivors per
   class and locale, the everyday corpus of 1,200 templated sentences with numbers in them and
   the ones mask() changed, the cost of one mask() call on a 2,000-character note, and the time
   over 100 KB adversarial strings built for the new detectors.

    .venv/bin/python bench/masking_corpus.py --only-catalogue   # section 4 alone
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memoryapp.masking import MAX_MASKED_CHARS, mask  # noqa: E402
from tests.masking import everyday_corpus as everyday  # noqa: E402
from tests.masking.forms_corpus import FORMS, LOCALES, build_forms_corpus, survivors  # noqa: E402

# -- the generated part of tests/data/everyday_sentences.txt ------------------------------------
_DATE_PATTERNS = {
    "en": ("%Y-%m-%d", "%m/%d/%Y", "%B %d, %Y"),
    "ja": ("%Y年%m月%d日", "%Y/%m/%d"),
    "he": ("%d/%m/%Y", "%d.%m.%Y"),
    "de": ("%d.%m.%Y",),
    "fr": ("%d/%m/%Y",),
    "es": ("%d/%m/%Y",),
    "it": ("%d/%m/%Y",),
    "pt": ("%d/%m/%Y",),
    "nl": ("%d-%m-%Y",),
    "pl": ("%d.%m.%Y",),
    "ko": ("%Y년 %m월 %d일", "%Y.%m.%d"),
    "zh": ("%Y年%m月%d日", "%Y-%m-%d"),
}


def _number_phrase(fake, rng: random.Random, lang: str) -> str:
    pick = rng.randrange(11)
    if pick == 0:
        return fake.date(pattern=rng.choice(_DATE_PATTERNS[lang]))
    if pick == 1:
        return f"{fake.date(pattern=rng.choice(_DATE_PATTERNS[lang]))} {fake.time(pattern='%H:%M')}"
    if pick == 2:
        return fake.pricetag()
    if pick == 3:
        return f"{rng.randint(1, 9)}, {rng.randint(10, 20)}, {rng.randint(21, 40)}"
    if pick == 4:
        start = rng.randint(1950, 2020)
        return f"{start}-{start + rng.randint(1, 5)}"
    if pick == 5:
        return f"{rng.randint(1, 20)}.{rng.randint(0, 20)}.{rng.randint(0, 200)}"
    if pick == 6:
        return f"{rng.randint(1, 23):02d}:{rng.randint(0, 59):02d}-{rng.randint(1, 23):02d}:{rng.randint(0, 59):02d}"
    if pick == 7:
        return f"{rng.randint(100, 999)}"
    if pick == 8:
        return f"{rng.randint(1, 99)}%"
    if pick == 9:
        return f"{rng.randint(1, 9)},{rng.randint(0, 999):03d}.{rng.randint(0, 99):02d}"
    return f"{rng.randint(1980, 2024)}, {rng.randint(1980, 2024)}"


def generate_everyday(seed: int = 22, per_locale: int = 120) -> list[str]:
    from faker import Faker

    rng = random.Random(seed)
    lines: list[str] = []
    for index, locale in enumerate(LOCALES):
        lang = locale[:2]
        fake = Faker(locale)
        fake.seed_instance(seed * 100 + index)
        lines.append(f"# generated, {locale}")
        for i in range(per_locale):
            sentence = fake.sentence().rstrip(".。")
            if i % 3 == 2:
                lines.append(f"{sentence}.")
            else:
                lines.append(f"{sentence} {_number_phrase(fake, rng, lang)}.")
    return lines


def write_everyday() -> None:
    path = everyday.EVERYDAY_FILE
    hand = []
    if path.exists():
        text = path.read_text(encoding="utf-8")
        marker = "# hand-written"
        if marker in text:
            hand = text[text.index(marker) :].splitlines()
    header = [
        "# Everyday sentences that masking must leave as written (tests/masking/everyday_corpus.py).",
        "# Generated lines: bench/masking_corpus.py --write-everyday (Faker, seed 22); hand-written lines at the end.",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header + generate_everyday() + hand) + "\n", encoding="utf-8")
    print(f"wrote {path}")


# -- hostile mixes ------------------------------------------------------------------------------
_PIECES = (
    " at ",
    " dot ",
    "a",
    "@",
    " @ ",
    "[at]",
    "[.]",
    "(dot)",
    '"',
    "-p",
    " -u ",
    ":",
    "%",
    "1",
    "12",
    "123456",
    " ",
    ",",
    ", ",
    ".",
    "/",
    "\u00a0",
    "\u200b",
)
_PIECES += (
    "passwort ist ",
    "contraseña del wifi es ",
    "密码是",
    "비밀번호는 ",
    "Telefon ",
    "zadzwoń pod ",
    "アット",
    "ドット",
    "mysql ",
    "sshpass ",
    "curl ",
    "[PHONE] ",
    "x",
)


def hostile(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        piece = rng.choice(_PIECES) * rng.choice((1, 1, 1, 5, 40))
        parts.append(piece)
        total += len(piece)
    return "".join(parts)[:size]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-form", type=int, default=60)
    parser.add_argument("--show", type=int, default=10)
    parser.add_argument("--hostile", type=int, default=40, help="hostile mixes to time")
    parser.add_argument("--write-everyday", action="store_true")
    parser.add_argument("--only-catalogue", action="store_true", help="issue 33's section alone")
    args = parser.parse_args()
    if args.write_everyday:
        write_everyday()
        return
    if args.only_catalogue:
        catalogue_section(args.show)
        return

    corpus = build_forms_corpus(seed=22, per_form=args.per_form)
    print(f"forms corpus: {len(corpus):,} values, {len(LOCALES)} locales ({', '.join(LOCALES)})")
    totals: collections.Counter = collections.Counter()
    left: collections.Counter = collections.Counter()
    kinds: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    examples = []
    for sample in corpus:
        result = mask(sample.text)
        totals[sample.form] += 1
        kinds[sample.form].update(result.kinds)
        found = survivors(sample, result.text)
        if found or not result.kinds:
            left[(sample.form, sample.locale)] += 1
            examples.append((sample.form, sample.locale, sample.text, result.text, found))
    for form in FORMS:
        per_locale = " ".join(f"{loc[:2]}:{left[(form, loc)]}" for loc in LOCALES)
        print(
            f"  {form:<7} {totals[form]:>5} values  survivors {sum(left[(form, loc)] for loc in LOCALES):>3}  "
            f"({per_locale})  kinds {dict(kinds[form])}"
        )
    for example in examples[: args.show]:
        print("   survivor:", example)

    print("\neveryday corpus (benign-change budget: at most 1 in 1,000 sentences)")
    sources = {
        "shipped file": everyday.shipped_sentences(),
        "older tests' benign sets": everyday.older_test_sentences(),
    }
    folder = everyday.locomo_dir()
    if folder is not None:
        sources["LoCoMo dev (5 conversations)"] = everyday.locomo_sentences(folder)
    else:
        print("  LoCoMo not found (set LOCOMO_DIR): the figures below leave it out")
    all_changed = 0
    all_sentences = 0
    for name, sentences in sources.items():
        changes = everyday.changed(sentences)
        all_changed += len(changes)
        all_sentences += len(sentences)
        print(
            f"  {name:<30} {len(sentences):>6} sentences  changed {len(changes):>3}  "
            f"({len(changes) / max(1, len(sentences)) * 100:.3f} %)"
        )
        for before, after in changes[: args.show]:
            print(f"     {before!r}\n       -> {after!r}")
    print(
        f"  all {all_sentences:,} sentences: {all_changed} changed = "
        f"{all_changed / max(1, all_sentences) * 1000:.2f} per 1,000"
    )

    rng = random.Random(22)
    worst = (0.0, "")
    for _ in range(args.hostile):
        text = hostile(rng, MAX_MASKED_CHARS)
        start = time.perf_counter()
        mask(text)
        elapsed = (time.perf_counter() - start) * 1000
        if elapsed > worst[0]:
            worst = (elapsed, text[:60])
    print(
        f"\nhostile mixes of the new detectors' pieces: {args.hostile} inputs of {MAX_MASKED_CHARS:,} chars, worst "
        f"{worst[0]:.1f} ms (starts {worst[1]!r})"
    )

    print()
    catalogue_section(args.show)


# -- issue 33 -----------------------------------------------------------------------------------
def _note(rng: random.Random, size: int = 2_000) -> str:
    """A 2,000-character note of everyday sentences with some personal data among them."""
    from tests.masking.catalogue_corpus import build_catalogue_corpus, build_everyday_corpus

    pool = [s for _, s in build_everyday_corpus(seed=7, count=200)] + [
        s.text for s in build_catalogue_corpus(seed=7, per_cell=1)[::25]
    ]
    parts: list[str] = []
    while sum(len(p) + 2 for p in parts) < size:
        parts.append(rng.choice(pool))
    return ". ".join(parts)[:size]


def _adversarial_100k() -> dict[str, str]:
    n = 100_000
    units = {
        "id groups": "A1 ",
        "digit-dash": "12-",
        "comma digits": "12, ",
        "ssn label": "SSN 12-",
        "ja at": "aアット",
        "ja dots": "aドット",
        "letters+digits": "AB12CD",
        "nine digits": "123456789 ",
        "mobile pairs": "20 ",
    }
    return {name: (unit * (n // len(unit) + 1))[:n] for name, unit in units.items()}


def region_of(locale: str) -> str:
    """The country of a corpus locale, as a workspace's region ("da_DK" -> "DK")."""
    return locale[-2:]


def catalogue_section(show: int = 10) -> None:
    from tests.masking.catalogue_corpus import CLASSES, build_catalogue_corpus, build_everyday_corpus
    from tests.masking.catalogue_corpus import survivors as catalogue_survivors

    corpus = build_catalogue_corpus()
    locales = sorted({s.locale for s in corpus})
    forms = sorted({s.form for s in corpus})
    print(
        f"catalogue corpus (issue 33): {len(corpus):,} values, {len(locales)} locales, {len(forms)} forms "
        f"({', '.join(forms)})"
    )
    for with_region in (False, True):
        # with a region: each locale's values masked as in a workspace of that locale's country
        print(
            "  without a workspace region:"
            if not with_region
            else "  with each locale's region as the workspace's (mask(text, region)):"
        )
        totals: collections.Counter = collections.Counter()
        left: collections.Counter = collections.Counter()
        examples = []
        for sample in corpus:
            result = mask(sample.text, region_of(sample.locale) if with_region else None)
            totals[sample.cls] += 1
            if catalogue_survivors(sample, result.text):
                left[(sample.cls, sample.locale)] += 1
                examples.append((sample.cls, sample.locale, sample.text, result.text))
        for cls in CLASSES:
            per_locale = " ".join(f"{loc}:{left[(cls, loc)]}" for loc in locales if left[(cls, loc)])
            print(
                f"    {cls:<13} {totals[cls]:>5} values  survivors {sum(left[(cls, loc)] for loc in locales):>4}  "
                f"{per_locale}"
            )
        print(f"    all: {sum(left.values())} of {len(corpus):,} survived")
        for example in examples[:: max(1, len(examples) // show)][:show]:
            print("     survivor:", example)

    everyday_corpus = build_everyday_corpus()
    kinds = collections.Counter(kind for kind, _ in everyday_corpus)
    regions = sorted({region_of(loc) for loc in locales})
    per_region: dict[str | None, list[tuple[str, str, str]]] = {}
    for region in (None, *regions):
        per_region[region] = [
            (kind, sentence, after)
            for kind, sentence in everyday_corpus
            if (after := mask(sentence, region).text) != sentence
        ]
    base = per_region[None]
    changed = collections.Counter(kind for kind, _, _ in base)
    print(
        f"\neveryday corpus (issue 33): {len(everyday_corpus):,} sentences, {len(base)} changed = "
        f"{len(base) / len(everyday_corpus) * 1000:.2f} per 1,000 (target <= 1)"
    )
    print("  " + " ".join(f"{kind}:{changed[kind]}/{kinds[kind]}" for kind in sorted(kinds)))
    for _, before, after in base[:show]:
        print(f"     {before!r} -> {after!r}")
    worst = max(regions, key=lambda r: len(per_region[r]))
    print(
        f"  with each of the {len(regions)} locales' regions as the workspace's: changed per region "
        + " ".join(f"{r}:{len(per_region[r])}" for r in regions)
    )
    print(
        f"  worst region {worst}: {len(per_region[worst])} changed = "
        f"{len(per_region[worst]) / len(everyday_corpus) * 1000:.2f} per 1,000 (target <= 1)"
    )
    for region in regions:
        for kind, before, after in per_region[region][:show]:
            print(f"     {region} {kind}: {before!r} -> {after!r}")

    rng = random.Random(33)
    notes = [_note(rng) for _ in range(120)]
    for note in notes[
        :20
    ]:  # warm the imports and metadata; the timed notes are others (the validators' caches see them first)
        mask(note)
    # without a region and with one (DK: pairs; PL: triples), each note in turn, so the machine's
    # load falls on all three alike
    timed: dict[str | None, list[float]] = {None: [], "DK": [], "PL": []}
    for note in notes[20:]:
        for region, times in timed.items():
            start = time.perf_counter()
            mask(note, region)
            times.append((time.perf_counter() - start) * 1000)
    for region, times in timed.items():
        times.sort()
        label = "" if region is None else f" with region {region}"
        print(
            f"{'' if region else chr(10)}mask(){label} on a 2,000-character note: p50 {times[len(times) // 2]:.2f} "
            f"ms, p95 {times[int(len(times) * 0.95)]:.2f} ms ({len(times)} calls)"
        )
    for name, text in _adversarial_100k().items():
        start = time.perf_counter()
        mask(text)
        elapsed = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        mask(text, "DK")
        print(
            f"  adversarial 100 KB {name!r}: {elapsed:.0f} ms, with region DK "
            f"{(time.perf_counter() - start) * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
