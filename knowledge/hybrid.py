"""Which passages a search returns: keyword search alone, or fused with dense vectors when an
admin configured an embedding model, then optionally reordered by a reranker.

Fusion is reciprocal rank fusion (Cormack et al., 2009): a passage scores Σ 1 / (K + rank) over
the lists it appears in, so neither list's raw scores (BM25 and cosine are not comparable) need
calibrating. Each list contributes its best `pool` passages; the reranker, when configured,
reorders the fused pool and the best `limit` are returned.

A provider failing at search time never fails the search: it falls back to what did work and
says so in the note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import Sum

from agent import embeddings
from agent.exceptions import ProviderError
from agent.model_config import ModelConfig

from . import embedding, lexical, vectors
from .models import Chunk, Document, RetrievalSettings

RRF_K = 60
POOL = 40  # candidates taken from each list (and given to the reranker)

KEYWORD, HYBRID, RERANKED = "keyword", "hybrid", "hybrid + rerank"
KEYWORD_NOTE = (
    "Keyword search (BM25): no embedding model is configured, so passages match by their words, "
    "not their meaning. Search with the words the documents would use."
)
HYBRID_NOTE = "Hybrid search: passages matching by their words and by their meaning (embeddings), fused."
RERANKED_NOTE = HYBRID_NOTE[:-1] + ", then reordered by a reranker."


@dataclass
class Found:
    ids: list[int]
    mode: str
    note: str


def fuse(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal rank fusion of ranked id lists, best first (ties: the smaller id first)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(dict.fromkeys(ranking), start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda item: (-scores[item], item))


def find(query: str, words: list[str], base_ids: Sequence[int], document_ids: Sequence[int], limit: int) -> Found:
    row = RetrievalSettings.load()
    config = embedding.embedding_config(row, for_query=True)
    if config is None:
        return Found(lexical.search(words, base_ids, document_ids, limit), KEYWORD, KEYWORD_NOTE)
    pool = max(limit, POOL)
    keyword = lexical.search(words, base_ids, document_ids, pool)
    try:
        target = embedding.embed_texts(config, [query])[0]
    except ProviderError as exc:
        note = (
            f"Keyword search only: the embedding model failed ({exc.message}), so passages match by their "
            "words, not their meaning. Search with the words the documents would use."
        )
        return Found(keyword[:limit], KEYWORD, note)
    stamps = vectors.stamps(base_ids, row.space)
    dense = vectors.search(target, base_ids, row.space, document_ids, pool, stamps)
    fused = fuse([keyword, dense])[:pool]
    mode, note = HYBRID, HYBRID_NOTE
    reranker = embedding.rerank_config(row)
    if reranker is not None and len(fused) > 1:
        try:
            fused = _rerank(reranker, query, fused)
            mode, note = RERANKED, RERANKED_NOTE
        except ProviderError as exc:
            note = f"{HYBRID_NOTE} The reranker failed ({exc.message}), so it did not reorder them."
    # Passages without a vector of this model: all the bases' passages (their documents keep
    # the count) less the vectors counted above; cheaper than looking for them one by one.
    passages = Document.objects.filter(base_id__in=base_ids).aggregate(n=Sum("chunk_count"))["n"] or 0
    lagging = max(0, passages - sum(count for count, _ in stamps.values()))
    if lagging:
        note += f" {lagging} passage(s) are still being embedded: until then they match by keyword only."
    return Found(fused[:limit], mode, note)


def _rerank(config: ModelConfig, query: str, ids: list[int]) -> list[int]:
    texts = dict(Chunk.objects.filter(pk__in=ids).values_list("pk", "text"))
    present = [i for i in ids if i in texts]
    order = embeddings.rerank(config, query, [texts[i][:4000] for i in present])
    ranked = [present[n] for n in order]
    return ranked + [i for i in present if i not in set(ranked)]
