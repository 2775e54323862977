"""Text embedders for ReasoningBank retrieval.

``local``: hashed word unigrams, word bigrams and character 4-grams, L2-normalised; deterministic and
needs no weights. ``openai``: any OpenAI-compatible ``/v1/embeddings`` endpoint.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from typing import Protocol

from evoaudit.config import EmbedderConfig
from evoaudit.offline import refuse_if_offline

_WORD = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def describe(self) -> dict[str, object]: ...


class HashedNgramEmbedder:
    def __init__(self, dims: int) -> None:
        self.dims = dims

    def describe(self) -> dict[str, object]:
        return {"backend": "local", "model": "hashed-ngrams", "dims": self.dims}

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        feats = [f"w:{w}" for w in words]
        feats += [f"b:{a}_{b}" for a, b in zip(words, words[1:], strict=False)]
        for w in words:
            padded = f"#{w}#"
            feats += [f"c:{padded[i : i + 4]}" for i in range(max(1, len(padded) - 3))]
        return feats

    def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vec = [0.0] * self.dims
            for feat in self._features(text):
                digest = hashlib.blake2b(feat.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "big") % self.dims
                vec[index] += 1.0 if digest[4] & 1 else -1.0
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            out.append([round(v / norm, 6) for v in vec])
        return out


class OpenAIEmbedder:
    def __init__(self, cfg: EmbedderConfig) -> None:
        if not cfg.base_url:
            raise ValueError(
                "methods_params.reasoningbank.embedder.base_url: required when the embedder backend is openai"
            )
        self.cfg = cfg

    def describe(self) -> dict[str, object]:
        return {"backend": "openai", "model": self.cfg.model, "base_url": self.cfg.base_url}

    def embed(self, texts: list[str]) -> list[list[float]]:
        refuse_if_offline("methods_params.reasoningbank.embedder")
        import openai

        key = os.environ.get(self.cfg.api_key_env, "") if self.cfg.api_key_env else ""
        client = openai.OpenAI(base_url=self.cfg.base_url, api_key=key or "unused", max_retries=5)
        data = client.embeddings.create(model=self.cfg.model, input=texts).data
        return [list(d.embedding) for d in sorted(data, key=lambda d: d.index)]


def make_embedder(cfg: EmbedderConfig) -> Embedder:
    if cfg.backend == "local":
        return HashedNgramEmbedder(cfg.dims)
    return OpenAIEmbedder(cfg)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a)) or 1.0
    nb = math.sqrt(sum(y * y for y in b)) or 1.0
    return dot / (na * nb)
