"""The vector store: passages' embeddings in the database, scored with numpy.

Vectors are rows of `knowledge_chunkvector` (float32 bytes beside the passage's base and
document), so they live wherever the passages live — the SQLite file under `make run`, the
PostgreSQL database in production — are written and deleted in the passages' transactions, and
every web and worker process reaches them with no service of its own. A search reads the
searched bases' vectors once into a matrix per process (kept while the base's vectors are
unchanged: their count and highest row id, one small query per search, tell) and scores them
exactly (cosine, a matrix product). Exact search over a base of 100 000 passages takes a few
milliseconds once its matrix is read; reading it takes longer, and its memory is
`passages × dimensions × 4` bytes per process, bounded by KNOWLEDGE_VECTOR_CACHE_MB.

On a PostgreSQL server with pgvector the same rows also carry an `embedding vector` column and
the database ranks them (knowledge/pgvector.py): no process reads the vectors. sqlite-vec is not
used: it needs a Python whose sqlite3 module loads extensions (this build's does not). See
docs/operations/knowledge.md.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Count, Max

from . import pgvector
from .models import Chunk, ChunkVector

WRITE_BATCH = 500
MIN_SCORE = 0.0  # cosine


def pack(values: Sequence[float]) -> bytes:
    """A unit-length float32 vector's bytes (cosine similarity is then a dot product)."""
    array = np.asarray(values, dtype="<f4")
    norm = float(np.linalg.norm(array))
    return (array / norm if norm else array).astype("<f4").tobytes()


def unpack(data: bytes | memoryview) -> Any:
    return np.frombuffer(bytes(data), dtype="<f4")


def write(chunks: Iterable[Chunk], vectors: Sequence[Sequence[float]], space: str) -> int:
    """Stores the passages' vectors (made by `space`); a passage that has one already keeps it."""
    rows = [
        ChunkVector(
            chunk_id=chunk.pk, base_id=chunk.base_id, document_id=chunk.document_id, space=space, vector=pack(v)
        )
        for chunk, v in zip(chunks, vectors, strict=True)
    ]
    for start in range(0, len(rows), WRITE_BATCH):
        ChunkVector.objects.bulk_create(rows[start : start + WRITE_BATCH], ignore_conflicts=True)
    if rows and pgvector.available():
        pgvector.fill_chunks([row.chunk_id for row in rows], [unpack(row.vector) for row in rows])
    return len(rows)


@dataclass
class _Matrix:
    stamp: tuple[int, int]
    chunk_ids: Any  # int64 array
    document_ids: Any  # int64 array
    values: Any  # float32 array, one unit vector a row

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes + self.chunk_ids.nbytes + self.document_ids.nbytes)


_cache: OrderedDict[tuple[int, str], _Matrix] = OrderedDict()
_lock = threading.Lock()


def _limit_bytes() -> int:
    return int(getattr(settings, "KNOWLEDGE_VECTOR_CACHE_MB", 512)) * 1024 * 1024


def _load(base_id: int, space: str, stamp: tuple[int, int]) -> _Matrix:
    rows = ChunkVector.objects.filter(base_id=base_id, space=space).values_list("chunk_id", "document_id", "vector")
    chunk_ids: list[int] = []
    document_ids: list[int] = []
    parts: list[bytes] = []
    for chunk_id, document_id, data in rows.iterator(chunk_size=2000):
        chunk_ids.append(chunk_id)
        document_ids.append(document_id)
        parts.append(bytes(data))
    width = len(parts[0]) // 4 if parts else 0
    same = [n for n, part in enumerate(parts) if len(part) == width * 4]  # a torn row cannot break a search
    values = np.frombuffer(b"".join(parts[n] for n in same), dtype="<f4").reshape(len(same), width)
    return _Matrix(
        stamp,
        np.asarray([chunk_ids[n] for n in same], dtype=np.int64),
        np.asarray([document_ids[n] for n in same], dtype=np.int64),
        values,
    )


def _matrix(base_id: int, space: str, stamp: tuple[int, int]) -> _Matrix:
    key = (base_id, space)
    with _lock:
        found = _cache.get(key)
        if found is not None and found.stamp == stamp:
            _cache.move_to_end(key)
            return found
    matrix = _load(base_id, space, stamp)
    with _lock:
        _cache[key] = matrix
        _cache.move_to_end(key)
        while len(_cache) > 1 and sum(m.nbytes for m in _cache.values()) > _limit_bytes():
            _cache.popitem(last=False)
    return matrix


def stamps(base_ids: Sequence[int], space: str) -> dict[int, tuple[int, int]]:
    """Per base with vectors of `space`: (how many, highest row id). Row ids are never reused,
    so any write or delete changes a base's stamp."""
    rows = (
        ChunkVector.objects.filter(base_id__in=base_ids, space=space)
        .values("base_id")
        .annotate(n=Count("id"), top=Max("id"))
        .values_list("base_id", "n", "top")
    )
    return {base_id: (n, top) for base_id, n, top in rows}


def search(
    query: Sequence[float],
    base_ids: Sequence[int],
    space: str,
    document_ids: Sequence[int] = (),
    limit: int = 10,
    found: dict[int, tuple[int, int]] | None = None,
) -> list[int]:
    """Ids of the passages nearest the query vector (cosine) in these bases (and documents,
    when given), best first. `found`: the bases' `stamps`, when the caller has them already."""
    if not base_ids or not space:
        return []
    target = unpack(pack(query))
    if pgvector.available():
        return pgvector.search(target, base_ids, space, document_ids, limit)
    wanted = np.asarray(sorted(set(document_ids)), dtype=np.int64) if document_ids else None
    scores: list[Any] = []
    ids: list[Any] = []
    for base_id, stamp in (stamps(base_ids, space) if found is None else found).items():
        matrix = _matrix(base_id, space, stamp)
        if not len(matrix.chunk_ids) or matrix.values.shape[1] != target.shape[0]:
            continue  # a model whose vectors have another size: none of this base's compare
        rows = slice(None) if wanted is None else np.isin(matrix.document_ids, wanted)
        scores.append(matrix.values[rows] @ target)
        ids.append(matrix.chunk_ids[rows])
    if not scores:
        return []
    all_scores = np.concatenate(scores)
    all_ids = np.concatenate(ids)
    # A passage at a right angle to the query (or further) shares nothing with it: not a match.
    related = all_scores > MIN_SCORE
    all_scores, all_ids = all_scores[related], all_ids[related]
    if not len(all_ids):
        return []
    count = min(limit, len(all_ids))
    top = np.argpartition(-all_scores, count - 1)[:count]
    order = top[np.lexsort((all_ids[top], -all_scores[top]))]
    return [int(i) for i in all_ids[order]]


def forget() -> None:
    """Drops this process's matrices (tests; a settings change makes them unreachable anyway)."""
    with _lock:
        _cache.clear()
