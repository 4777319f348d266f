"""The embedding engine protocol and the one way to get an engine (``load_embedder``).

An engine turns texts into unit-length float32 vectors of a fixed dimension; its ``model_id``
names the model and its version, so vectors made by another model are never compared with its
own (stored vectors are keyed by it). Engines are loaded only where vectors are configured:
the extra (``ctxstore[embed]``) may be missing, and then ``EmbedUnavailable`` (E027) says so in
one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

from ctxstore.errors import EmbedUnavailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MODELS", "Embedder", "load_embedder"]

MODELS = ("wordllama",)
"""The engines ``load_embedder`` knows."""


class Embedder(Protocol):
    """Texts to vectors.

    Attributes:
        model_id: The model and its version (``wordllama-l2_supercat-256@0.4.0.post1``).
        dim: The length of every vector.
    """

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length row per stored text (a text with no known token: a row of zeros)."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The vector of a query (a model may embed queries unlike stored texts)."""
        ...


@lru_cache(maxsize=2)
def load_embedder(model: str = "wordllama") -> Embedder:
    """The engine named ``model``, loaded once per process.

    Raises:
        EmbedUnavailable: (E027) the extra is not installed, or its files are missing or
            damaged.
    """
    if model not in MODELS:
        raise EmbedUnavailable(f"unknown embedding model {model!r} (known: {', '.join(MODELS)})")
    from ctxstore.embed.wordllama import load_wordllama

    return load_wordllama()
