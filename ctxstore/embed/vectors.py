"""Vector maths for hybrid search: the stored form, brute-force nearest neighbours.

Brute force: every stored vector is compared with the query (one matrix product). At 256
float32 dimensions that is 1 KB per vector; 100,000 vectors (100 MB read, ~50 ms of arithmetic)
is where an approximate index would start to pay, far beyond a person's transcript memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["to_blob", "from_blobs", "nearest", "best"]


def to_blob(vector: npt.NDArray[np.float32]) -> bytes:
    """A vector as stored: little-endian float32 bytes."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: Sequence[bytes], dim: int) -> npt.NDArray[np.float32]:
    """Stored vectors as one matrix (a blob of another length is a row of zeros)."""
    import numpy as np

    out = np.zeros((len(blobs), dim), dtype=np.float32)
    for i, blob in enumerate(blobs):
        if isinstance(blob, bytes) and len(blob) == 4 * dim:
            out[i] = np.frombuffer(blob, dtype="<f4")
    return out


def nearest(matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int
            ) -> list[tuple[int, float]]:
    """The ``k`` rows most similar to ``query`` (cosine of unit vectors), best first."""
    if not len(matrix) or k <= 0:
        return []
    return best(matrix @ query, k)


def best(scores: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    """``(index, score)`` of the ``k`` highest ``scores``, best first (ties: lower index)."""
    import numpy as np

    if not len(scores) or k <= 0:
        return []
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(int(i), float(scores[i])) for i in top]
