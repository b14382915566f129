"""Knowledge retrieval figures (issue 39): ingestion throughput, search latency, retrieval quality.

    nice python -m bench.knowledge                      # everything, embedded SQLite
    nice python -m bench.knowledge --only quality       # one part: ingest, latency, quality
    nice python -m bench.knowledge --only latency --postgres postgres://postgres@127.0.0.1:5432/postgres

Runs in this process against a database of its own (a fresh SQLite file under
var/bench-knowledge/, or a fresh `tessera_bench_knowledge` database on the PostgreSQL server
given), with no services: the cache is in-process and Celery is not involved (the worker's own
code, `knowledge.ingest.index`, is called directly, from `--threads` threads as a files worker's
concurrency would). The embedding model is the demo's (`demo/embed` through LiteLLM): its
vectors cost next to nothing, so the figures are Tessera's own cost, not a provider's.

- ingest: `--ingest` documents (copies of the corpus's pages, each made distinct) added and
  indexed through the real path: stored file, extraction in its sandboxed subprocess, chunking,
  embedding, writing. Documents and passages per second. `--ingest-in-process`: the same with
  the reader called in this process instead of its sandboxed child (what the rest costs).
- latency: `--chunks` passages (sentences of the corpus, shuffled into passages) in 1 000
  documents, with vectors; `knowledge.retrieval.search` (access check, search, passages read),
  keyword and hybrid, p50/p99 over `--queries` queries after one warm-up query (reported apart:
  the first hybrid query reads the vectors into memory).
- quality: the corpus (npm `markdownlint`, its README and rule pages) ingested for real; the
  questions of bench/knowledge_gold.json asked through keyword, dense-only and hybrid search and
  through a plain BM25 baseline (`bm25s` over the same passages); recall@5 and nDCG@10 of the
  pages the passages come from.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "markdownlint@0.40.0"
CACHE = ROOT / ".cache" / "bench-knowledge"
VAR = ROOT / "var" / "bench-knowledge"
GOLD = Path(__file__).with_name("knowledge_gold.json")
PG_NAME = "tessera_bench_knowledge"


def corpus() -> dict[str, str]:
    """The package's documentation pages by path (installed from the npm registry once)."""
    folder = CACHE / PACKAGE.replace("@", "-")
    if not (folder / "package").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        name = subprocess.run(
            ["npm", "pack", PACKAGE, "--silent", "--pack-destination", str(folder)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        with tarfile.open(folder / name) as archive:
            archive.extractall(folder, filter="data")
    base = folder / "package"
    pages = [base / "README.md", *sorted((base / "doc").glob("*.md"))]
    return {str(p.relative_to(base)): p.read_text() for p in pages if p.name != "Rules.md"}


def setup(postgres: str | None, tag: str = "") -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.knowledge_settings"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    var = VAR / (("postgresql" if postgres else "sqlite") + tag)
    os.environ["TESSERA_FILES_DIR"] = str(var / "files")
    shutil.rmtree(var, ignore_errors=True)
    var.mkdir(parents=True)
    if postgres:
        import psycopg

        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_NAME}{tag}")
            conn.execute(f"CREATE DATABASE {PG_NAME}{tag}")
        os.environ["DATABASE_URL"] = postgres.rsplit("/", 1)[0] + "/" + PG_NAME + tag
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{var / 'bench.sqlite3'}"
    import django

    django.setup()
    from django.core.management import call_command

    import demo
    from knowledge import embedding, ingest

    call_command("migrate", verbosity=0)
    demo.register()
    # No broker: the benchmark calls the worker's code itself.
    ingest.queue = lambda document_id: None
    embedding.queue_fill = lambda countdown=0: None


def use_model(model: str) -> None:
    from knowledge.models import RetrievalSettings

    row = RetrievalSettings.load()
    row.embedding_model = model
    row.save()


def owner() -> Any:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench")
    return user


def ingest_run(pages: dict[str, str], count: int, threads: int, sandboxed: bool = True) -> dict[str, Any]:
    from django.db import connection

    from core.documents.extract import extract
    from knowledge import ingest
    from knowledge.models import Chunk, KnowledgeBase
    from toolsets.files.sandbox import run

    # In process: the same reader without its sandboxed child process (whose start-up, a Python
    # interpreter, is most of a small document's cost), to see the rest of the path at scale.
    ingest.run = run if sandboxed else lambda data, family, name, limits, timeout_s: extract(data, family, name, limits)
    use_model("demo/embed")
    base = KnowledgeBase.objects.create(
        owner=owner(), name=f"ingest {count} {'sandboxed' if sandboxed else 'in process'}"
    )
    names = list(pages)
    started = time.perf_counter()
    cpu = time.process_time()
    ids = []
    for n in range(count):
        name = names[n % len(names)]
        document, _ = ingest.add(base, f"copy{n}/{name}", f"<!-- copy {n} -->\n{pages[name]}".encode())
        ids.append(document.pk)
    added = time.perf_counter() - started

    def index(document_id: int) -> None:
        try:
            ingest.index(document_id)
        finally:
            connection.close()

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(index, ids))
    took = time.perf_counter() - started
    chunks = Chunk.objects.filter(base=base).count()
    failed = base.documents.exclude(status="ready").count()
    return {
        "documents": count,
        "failed": failed,
        "passages": chunks,
        "seconds": round(took, 1),
        "adding_seconds": round(added, 1),
        "documents_per_s": round(count / took, 1),
        "passages_per_s": round(chunks / took, 1),
        "main_process_cpu_s": round(time.process_time() - cpu, 1),
        "threads": threads,
        "extraction": "sandboxed child process" if sandboxed else "in process",
    }


def synthesize(pages: dict[str, str], chunks: int, seed: int = 7) -> dict[str, Any]:
    """`chunks` passages of corpus sentences in 1 000 documents, with demo vectors."""
    import re

    from demo.embedding import vector
    from knowledge import vectors
    from knowledge.models import Chunk, Document, KnowledgeBase, RetrievalSettings

    use_model("demo/embed")
    space = RetrievalSettings.load().space
    rng = random.Random(seed)
    sentences = [s.strip() for text in pages.values() for s in re.split(r"(?<=[.!?])\s+|\n\n", text) if len(s) > 30]
    base = KnowledgeBase.objects.create(owner=owner(), name="latency")
    per_document = max(1, chunks // 1000)
    documents = Document.objects.bulk_create(
        Document(base=base, reference=f"doc{n}.md", title=f"doc{n}.md", status="ready", chunk_count=per_document)
        for n in range(math.ceil(chunks / per_document))
    )
    started = time.perf_counter()
    made = 0
    for document in documents:
        rows = []
        for position in range(min(per_document, chunks - made)):
            text = " ".join(rng.choice(sentences) for _ in range(4))[:1200]
            rows.append(Chunk(document=document, base=base, position=position, heading=document.title, text=text))
        Chunk.objects.bulk_create(rows)
        vectors.write(rows, [vector(f"{c.heading}\n\n{c.text}") for c in rows], space)
        made += len(rows)
    return {"base": base, "passages": made, "build_seconds": round(time.perf_counter() - started, 1)}


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency_run(pages: dict[str, str], chunks: int, queries: int) -> dict[str, Any]:
    from knowledge import retrieval, vectors

    built = synthesize(pages, chunks)
    user = owner()
    questions = [q["q"] for q in json.loads(GOLD.read_text())["questions"]]
    asked = [questions[n % len(questions)] for n in range(queries)]
    result: dict[str, Any] = {"passages": built["passages"], "build_seconds": built["build_seconds"]}
    for model, mode in (("", "keyword"), ("demo/embed", "hybrid")):
        use_model(model)
        vectors.forget()
        first = time.perf_counter()
        retrieval.search(user.pk, asked[0], bases=[built["base"].pk])
        cold = time.perf_counter() - first
        times, cpu = [], []
        for question in asked:
            started, used = time.perf_counter(), time.thread_time()
            found = retrieval.search(user.pk, question, bases=[built["base"].pk])
            times.append(time.perf_counter() - started)
            cpu.append(time.thread_time() - used)
            assert found["retrieval"] == mode, found["retrieval"]
        result[mode] = {
            "first_ms": round(cold * 1000, 1),
            "p50_ms": round(statistics.median(times) * 1000, 1),
            "p99_ms": round(_percentile(times, 0.99) * 1000, 1),
            # CPU of this thread alone: what a query costs, whatever else the machine is doing
            # (the database's work is in this thread on SQLite, in the server on PostgreSQL).
            "cpu_p50_ms": round(statistics.median(cpu) * 1000, 1),
            "cpu_p99_ms": round(_percentile(cpu, 0.99) * 1000, 1),
            "queries": len(times),
            "load_average": round(os.getloadavg()[0], 1),
        }
        print(json.dumps({mode: result[mode]}), flush=True)
    return result


def _scores(ranked_pages: list[list[str]], gold: list[dict[str, Any]]) -> dict[str, float]:
    recall, ndcg = [], []
    for pages, item in zip(ranked_pages, gold, strict=True):
        relevant = set(item["relevant"])
        order = list(dict.fromkeys(pages))
        recall.append(len(relevant & set(order[:5])) / len(relevant))
        dcg = sum(1 / math.log2(rank + 2) for rank, page in enumerate(order[:10]) if page in relevant)
        ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(relevant), 10)))
        ndcg.append(dcg / ideal)
    return {"recall@5": round(statistics.mean(recall), 3), "nDCG@10": round(statistics.mean(ndcg), 3)}


def quality_run(pages: dict[str, str]) -> dict[str, Any]:
    import bm25s

    from knowledge import embedding, ingest, retrieval, vectors
    from knowledge.models import Chunk, KnowledgeBase, RetrievalSettings

    use_model("demo/embed")
    base = KnowledgeBase.objects.create(owner=owner(), name="markdownlint")
    for name, text in pages.items():
        document, _ = ingest.add(base, name, text.encode())
        ingest.index(document.pk)
    chunks = list(Chunk.objects.filter(base=base).select_related("document").order_by("id"))
    page_of = {c.pk: c.document.reference for c in chunks}
    gold = json.loads(GOLD.read_text())["questions"]
    user = owner()
    runs: dict[str, Callable[[str], list[str]]] = {}

    def tessera(question: str) -> list[str]:
        found = retrieval.search(user.pk, question, bases=[base.pk], limit=20)
        return [page_of[int(p["handle"][1:])] for p in found["passages"]]

    config = embedding.embedding_config()
    space = RetrievalSettings.load().space

    def dense(question: str) -> list[str]:
        assert config is not None
        target = embedding.embed_texts(config, [question])[0]
        return [page_of[i] for i in vectors.search(target, [base.pk], space, limit=20)]

    retriever = bm25s.BM25()
    passages = [f"{c.heading}\n{c.text}" for c in chunks]
    retriever.index(bm25s.tokenize(passages, show_progress=False), show_progress=False)

    def baseline(question: str) -> list[str]:
        tokens = bm25s.tokenize([question], show_progress=False)
        found, _ = retriever.retrieve(tokens, k=min(20, len(chunks)), show_progress=False)
        return [page_of[chunks[int(i)].pk] for i in found[0]]

    result: dict[str, Any] = {"pages": len(pages), "passages": len(chunks), "questions": len(gold)}
    runs["bm25s (plain BM25)"] = baseline
    runs["dense only (demo/embed)"] = dense
    runs["hybrid (FTS5 + demo/embed, RRF)"] = tessera
    for name, run in runs.items():
        result[name] = _scores([run(item["q"]) for item in gold], gold)
    use_model("")
    result["keyword (Tessera, FTS5 BM25)"] = _scores([tessera(item["q"]) for item in gold], gold)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["ingest", "latency", "quality"], action="append")
    parser.add_argument("--postgres", help="a PostgreSQL server's URL (a database of its own is made there)")
    parser.add_argument("--ingest", default="1000", help="document counts (sandboxed extraction), comma-separated")
    parser.add_argument(
        "--ingest-in-process", default="1000,10000", help="document counts to ingest with extraction in this process"
    )
    parser.add_argument("--threads", type=int, default=2, help="documents indexed at once")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    parts = args.only or ["ingest", "latency", "quality"]
    pages = corpus()
    # Each set of parts has a database of its own: two runs of different parts can go at once.
    setup(args.postgres, "" if parts == ["ingest", "latency", "quality"] else "_" + "_".join(sorted(parts)))
    from django.db import connection

    figures: dict[str, Any] = {"database": connection.vendor, "corpus": PACKAGE}
    if "quality" in parts:
        figures["quality"] = quality_run(pages)
        print(json.dumps(figures["quality"], indent=1), flush=True)
    if "latency" in parts:
        figures["latency"] = latency_run(pages, args.chunks, args.queries)
        print(json.dumps(figures["latency"], indent=1), flush=True)
    if "ingest" in parts:
        runs = [(int(n), True) for n in args.ingest.split(",") if n]
        runs += [(int(n), False) for n in args.ingest_in_process.split(",") if n]
        figures["ingest"] = []
        for count, sandboxed in runs:
            figures["ingest"].append(ingest_run(pages, count, args.threads, sandboxed))
            print(json.dumps(figures["ingest"][-1], indent=1), flush=True)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
