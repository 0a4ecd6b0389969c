"""Zero survivors over generated personal data (issue 13 §3): Faker values in six locales
(phone numbers, e-mails, card numbers plain/spaced/dashed, IBANs compact/grouped, BBANs after an
account word, Israeli IDs as he_IL ssn, US/FR social security numbers, passports, passwords)
and synthetic tokens of known shapes, inside English and Japanese sentences. Seeded, so every
run masks the same ~5,000 values; no Django."""

from __future__ import annotations

import collections

from memoryapp.masking import mask
from tests.masking.pii_corpus import LOCALES, build_corpus, survivors

CORPUS = build_corpus(seed=13)


def test_the_corpus_covers_every_locale_and_category_with_at_least_5000_values():
    assert len(CORPUS) >= 5000
    assert {s.locale for s in CORPUS} >= set(LOCALES)
    by_category = collections.Counter(s.category for s in CORPUS)
    assert set(by_category) == {"phone", "email", "card", "iban", "bban", "ssn", "passport", "password", "token"}
    assert min(by_category.values()) >= 100
    assert sum(any("\u3040" <= ch <= "\u30ff" for ch in s.text) for s in CORPUS) >= 1000  # Japanese sentences


def test_no_generated_value_survives_masking():
    found = []
    for sample in CORPUS:
        result = mask(sample.text)
        left = survivors(sample, result.text)
        if left or not result.kinds:
            found.append((sample.category, sample.locale, sample.text, result.text, left))
    assert found == [], f"{len(found)} survivors of {len(CORPUS)}: {found[:20]}"


def test_masking_the_corpus_is_idempotent():
    for sample in CORPUS[::7]:
        once = mask(sample.text).text
        assert mask(once).text == once, sample
