"""Everyday text that masking must leave alone (issue 22: a benign-change budget of at most 1 in
1,000 sentences), for tests/masking/test_forms.py and bench/masking_corpus.py.

Two sources:

- the LoCoMo development conversations (real conversational English: every dialogue turn, image
  caption and observation, split into sentences), read from ``../shared/data/locomo-dev/`` beside
  the checkout (or ``$LOCOMO_DIR``); research data, so never copied into the repository;
- ``tests/data/everyday_sentences.txt``, shipped: sentences in the twelve locales' languages with
  dates, times, prices, counts, years, versions and the words the new detectors key on
  (password, phone, "at", "dot") used in ordinary ways. Most lines were generated once by
  ``bench/masking_corpus.py --write-everyday`` from Faker (seeded); the hand-written lines at the
  end are marked. The benign sentences of the older masking tests are added at run time.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EVERYDAY_FILE = ROOT / "tests" / "data" / "everyday_sentences.txt"
BUDGET = 1 / 1000

_SENTENCE_END_RE = re.compile(r"(?<=[.!?。！？])\s+")


def locomo_dir() -> Path | None:
    """The LoCoMo folder: $LOCOMO_DIR, or shared/ beside the checkout (CI, the main checkout),
    or beside the folder that holds the checkout (a worktree under wt/)."""
    candidates = [Path(os.environ["LOCOMO_DIR"])] if os.environ.get("LOCOMO_DIR") else []
    candidates += [
        ROOT.parent / "shared" / "data" / "locomo-dev",
        ROOT.parent.parent / "shared" / "data" / "locomo-dev",
    ]
    for candidate in candidates:
        if sorted(candidate.glob("conv-*.json")):
            return candidate
    return None


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END_RE.split(text) if s.strip()]


def locomo_sentences(folder: Path) -> list[str]:
    sentences: list[str] = []
    for path in sorted(folder.glob("conv-*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        for name, value in conversation.items():
            if name.startswith("session_") and isinstance(value, list):
                for turn in value:
                    sentences += split_sentences(turn.get("text", ""))
                    if turn.get("blip_caption"):
                        sentences += split_sentences(turn["blip_caption"])
            elif name.endswith("_observation") and isinstance(value, dict):
                for facts in value.values():
                    sentences += [fact[0] for fact in facts if isinstance(fact, list) and fact]
    return sentences


def shipped_sentences() -> list[str]:
    lines = EVERYDAY_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def older_test_sentences() -> list[str]:
    """The benign sentences the older masking tests hold."""
    from tests.masking.known_texts import BENIGN, ORDINARY_TEXTS

    return list(BENIGN) + list(ORDINARY_TEXTS)


def changed(sentences: list[str]) -> list[tuple[str, str]]:
    from memoryapp.masking import mask

    out = []
    for sentence in sentences:
        masked = mask(sentence).text
        if masked != sentence:
            out.append((sentence, masked))
    return out
