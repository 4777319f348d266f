"""WordLlama (``l2_supercat``, 256 dimensions): a static model whose weights ship in its wheel.

``pip install wordllama`` (about 19 MB) brings them, so nothing is downloaded, ever.

The package itself is not imported: its ``__init__`` pulls in ``requests`` and ``pydantic`` and
sets up logging, and its loader looks for the tokenizer under a misspelt directory before
trying the network. Its two data files are read directly instead, from where the installed
package keeps them: the tokenizer (``tokenizers``, from a local file only) and the
safetensors weights, mapped into memory (a query reads only the rows of its tokens, so loading
costs about a millisecond, not the 16 MB). The vector is what WordLlama's own ``embed(norm=True)``
computes: the mean of the text's token embeddings, scaled to unit length.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.errors import EmbedUnavailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MAX_CHARS", "WordLlamaEmbedder", "load_wordllama"]

MAX_CHARS = 8000
"""Characters of a text that are embedded (the head): bounded work per text."""
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_TENSOR = "embedding.weight"
_MAX_HEADER = 1 << 20
_HINT = "install the extra: pip install 'ctxstore[embed]' (or set [memory] vectors = \"off\")"


class WordLlamaEmbedder:
    """Mean-pooled WordLlama token embeddings, unit length (``Embedder``)."""

    def __init__(self, weights: npt.NDArray[np.float16], tokenizer: object, version: str) -> None:
        self.weights = weights
        self.tokenizer = tokenizer
        self.dim = int(weights.shape[1])
        self.model_id = f"wordllama-l2_supercat-{self.dim}@{version}"

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text (zeros for a text with no token)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encoded = self.tokenizer.encode_batch(  # type: ignore[attr-defined]
            [t[:MAX_CHARS] for t in texts], add_special_tokens=False)
        lengths = np.array([len(e.ids) for e in encoded], dtype=np.int64)
        if not lengths.any():
            return out
        ids = np.concatenate([np.asarray(e.ids, dtype=np.int64) for e in encoded])
        np.clip(ids, 0, self.weights.shape[0] - 1, out=ids)
        rows = self.weights[ids].astype(np.float32)
        filled = lengths > 0
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[filled]
        out[filled] = np.add.reduceat(rows, starts, axis=0) / lengths[filled, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        out /= norms
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """A query's vector: as any text's."""
        vectors = self.embed([text])
        return vectors[0]  # type: ignore[no-any-return]


def _package_dir() -> Path:
    """Where the installed ``wordllama`` package is, without importing it."""
    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbedUnavailable("vector search needs the package wordllama, which is not installed",
                               hint=_HINT)
    return Path(next(iter(spec.submodule_search_locations)))


def _map_weights(path: Path) -> npt.NDArray[np.float16]:
    """The embedding matrix of a safetensors file, mapped read-only (checked against the file)."""
    import numpy as np

    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if not 0 < length <= min(_MAX_HEADER, size - 8):
                raise ValueError("bad header length")
            info = json.loads(f.read(length))[_TENSOR]
        rows, dim = (int(n) for n in info["shape"])
        begin, end = (int(n) for n in info["data_offsets"])
        if info["dtype"] != "F16" or end - begin != rows * dim * 2 or 8 + length + end > size:
            raise ValueError("unexpected tensor layout")
        return np.memmap(path, dtype=np.float16, mode="r", offset=8 + length + begin,
                         shape=(rows, dim))
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise EmbedUnavailable(f"the WordLlama weights {path} cannot be read: {exc}",
                               hint="reinstall the extra: pip install --force-reinstall "
                                    "wordllama") from None


def load_wordllama() -> WordLlamaEmbedder:
    """The model from the installed wheel's files; no network, no download.

    Raises:
        EmbedUnavailable: (E027) NumPy, ``tokenizers`` or ``wordllama`` is missing, or its
            files are.
    """
    try:
        import numpy  # noqa: F401  (checked here, used by the engine)
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedUnavailable(f"vector search needs {exc.name or 'numpy and tokenizers'}, "
                               "which is not installed", hint=_HINT) from None
    root = _package_dir()
    weights = _map_weights(root / _WEIGHTS)
    try:
        tokenizer = Tokenizer.from_file(str(root / _TOKENIZER))
    except Exception as exc:  # tokenizers raises its own Exception type for a bad file
        raise EmbedUnavailable(f"the WordLlama tokenizer {root / _TOKENIZER} cannot be read: "
                               f"{str(exc)[:200]}", hint=_HINT) from None
    try:
        version = metadata.version("wordllama")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return WordLlamaEmbedder(weights, tokenizer, version)
