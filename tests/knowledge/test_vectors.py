"""Dense retrieval: the demo embedding model through LiteLLM, the vector store (on whichever
database the suite runs: SQLite, or PostgreSQL without pgvector), hybrid fusion, the re-index
when the model changes, and vectors going with their documents."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.db import connection

from agent import embeddings
from agent.exceptions import ProviderError
from agent.model_config import ModelConfig
from knowledge import embedding, hybrid, pgvector, retrieval, vectors
from knowledge.models import Chunk, ChunkVector, RetrievalSettings

pytestmark = pytest.mark.django_db

DELETING = b"# Files\n\n## Deleting\n\nTo remove a file, open its menu and choose Delete. It goes to the bin.\n"
PROXY = b"# Network\n\n## Proxy\n\nThe proxy setting lives in Preferences, under Network.\n"
TRAVEL = b"# Travel\n\n## Cars\n\nA company car is booked through the travel desk.\n"


@pytest.fixture(autouse=True)
def _demo_provider() -> Any:
    import demo

    demo.register()
    vectors.forget()
    yield
    vectors.forget()


def _configure(model: str = "demo/embed", **more: Any) -> RetrievalSettings:
    row = RetrievalSettings.load()
    row.embedding_model = model
    for name, value in more.items():
        setattr(row, name, value)
    row.save()
    return row


def _embed(texts: list[str]) -> list[list[float]]:
    config = embedding.embedding_config()
    assert config is not None
    return embedding.embed_texts(config, texts)


def _search(user: Any, query: str, **kwargs: Any) -> dict[str, Any]:
    return retrieval.search(user.pk, query, **kwargs)


def test_the_demo_model_embeds_through_litellm_with_a_little_meaning() -> None:
    config = ModelConfig(model="demo/embed")

    erase, delete, car = embeddings.embed(config, ["how do I erase a file", "Deleting files", "cars"], batch=2)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert len(erase) == 256 and abs(cosine(erase, erase) - 1) < 1e-6
    assert cosine(erase, delete) > 0.5 > cosine(erase, car)


def test_an_unknown_embedding_model_is_a_clear_provider_error() -> None:
    with pytest.raises(ProviderError):
        embeddings.embed(ModelConfig(model="no-such-provider/model", retries=0), ["x"])


def test_fusion_rewards_passages_both_lists_rank() -> None:
    assert hybrid.fuse([[1, 2, 3], [3, 4, 1]]) == [1, 3, 2, 4]
    assert hybrid.fuse([[], [7, 8]]) == [7, 8]
    assert hybrid.fuse([[5, 5, 6]]) == [5, 6]  # a repeat does not count twice


def test_without_a_model_search_is_keyword_and_ingestion_stores_no_vectors(
    user: Any, make_base: Any, add_document: Any
) -> None:
    add_document(make_base(user), "files.md", DELETING)

    result = _search(user, "how do I erase a file")

    assert result["retrieval"] == "keyword" and "no embedding model" in result["note"]
    assert not ChunkVector.objects.exists()


def test_ingestion_embeds_passages_and_hybrid_finds_by_meaning(user: Any, make_base: Any, add_document: Any) -> None:
    _configure()
    base = make_base(user)
    files = add_document(base, "files.md", DELETING)
    add_document(base, "network.md", PROXY)
    add_document(base, "travel.md", TRAVEL)
    assert ChunkVector.objects.count() == Chunk.objects.count() == 3

    # "erase" and "wipe" are in no document: keyword search alone finds nothing.
    keyword_only = hybrid.find("erase wipe", ["erase", "wipe"], [base.pk], [], 5)
    result = _search(user, "erase wipe")

    assert result["retrieval"] == "hybrid" and "meaning" in result["note"]
    assert result["passages"][0]["document"] == f"d{files.pk}"
    assert keyword_only.mode == "hybrid" and keyword_only.ids[0] == files.chunks.get().pk


def test_dense_search_respects_base_and_document_filters(user: Any, make_base: Any, add_document: Any) -> None:
    row = _configure()
    mine, other = make_base(user, "Mine"), make_base(user, "Other")
    files = add_document(mine, "files.md", DELETING)
    add_document(other, "files.md", DELETING)
    travel = add_document(mine, "travel.md", TRAVEL)
    query = _embed(["remove a file or a car"])[0]

    in_mine = vectors.search(query, [mine.pk], row.space)
    in_travel = vectors.search(query, [mine.pk], row.space, document_ids=[travel.pk])

    assert set(Chunk.objects.filter(pk__in=in_mine).values_list("base_id", flat=True)) == {mine.pk}
    assert in_mine[0] == files.chunks.get().pk
    assert in_travel == [travel.chunks.get().pk]
    assert vectors.search(query, [], row.space) == []


def test_deleting_a_document_or_base_removes_its_vectors(user: Any, make_base: Any, add_document: Any) -> None:
    row = _configure()
    base, kept = make_base(user, "Gone"), make_base(user, "Kept")
    document = add_document(base, "files.md", DELETING)
    add_document(base, "travel.md", TRAVEL)
    add_document(kept, "files.md", DELETING)
    query = _embed(["remove a file"])[0]
    assert vectors.search(query, [base.pk], row.space)  # the matrix is cached now

    document.delete()
    assert not ChunkVector.objects.filter(document_id=document.pk).exists()
    assert document.pk not in set(
        Chunk.objects.filter(pk__in=vectors.search(query, [base.pk], row.space)).values_list("document_id", flat=True)
    )
    base.delete()
    assert list(ChunkVector.objects.values_list("base_id", flat=True).distinct()) == [kept.pk]


def test_a_changed_document_is_embedded_again(user: Any, make_base: Any, add_document: Any) -> None:
    from knowledge import ingest

    _configure()
    base = make_base(user)
    document = add_document(base, "guide.md", DELETING)
    before = set(ChunkVector.objects.values_list("chunk_id", flat=True))

    ingest.add(base, "guide.md", PROXY)
    ingest.index(document.pk)

    after = set(ChunkVector.objects.values_list("chunk_id", flat=True))
    assert after and not (after & before)
    assert after == set(document.chunks.values_list("pk", flat=True))


def test_changing_the_model_reindexes_every_passage(
    user: Any, make_base: Any, add_document: Any, django_capture_on_commit_callbacks: Any
) -> None:
    base = make_base(user)
    add_document(base, "files.md", DELETING)
    add_document(base, "travel.md", TRAVEL)
    assert embedding.fill() == 0  # no model: nothing to embed

    with django_capture_on_commit_callbacks() as queued:
        first = _configure()
    assert queued  # the save queues the re-index task
    assert embedding.missing([base.pk]) == 2
    assert embedding.fill() == 2 and embedding.missing([base.pk]) == 0
    assert set(ChunkVector.objects.values_list("space", flat=True)) == {first.space}

    second = _configure(embedding_params={"dimensions": 256})  # another model's vectors
    assert second.space != first.space
    assert embedding.missing([base.pk]) == 2
    assert embedding.fill() == 2
    assert set(ChunkVector.objects.values_list("space", flat=True)) == {second.space}

    _configure("")  # no model: the vectors go, search is keyword again
    embedding.fill()
    assert not ChunkVector.objects.exists()
    assert _search(user, "car")["retrieval"] == "keyword"


def test_passages_not_yet_embedded_are_found_by_keyword_and_the_note_says_so(
    user: Any, make_base: Any, add_document: Any
) -> None:
    base = make_base(user)
    add_document(base, "network.md", PROXY)  # indexed before any model was configured
    RetrievalSettings.objects.filter(pk=1).update(embedding_model="demo/embed")
    RetrievalSettings.forget()

    result = _search(user, "proxy setting")

    assert result["retrieval"] == "hybrid" and result["count"] == 1
    assert "1 passage(s) are still being embedded" in result["note"]


def test_a_failing_embedding_model_falls_back_to_keyword_search(user: Any, make_base: Any, add_document: Any) -> None:
    base = make_base(user)
    add_document(base, "network.md", PROXY)
    RetrievalSettings.objects.filter(pk=1).update(embedding_model="no-such-provider/model")
    RetrievalSettings.forget()

    result = _search(user, "proxy setting")

    assert result["retrieval"] == "keyword" and "embedding model failed" in result["note"]
    assert "no embedding model is configured" not in result["note"]  # one is: it failed
    assert result["count"] == 1


@pytest.fixture
def rerank_server() -> Any:
    """A Cohere-compatible rerank endpoint (what `litellm.rerank` calls for `cohere/…`): it ranks
    documents that mention a car first, and records what it was asked."""
    asked: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append({"path": self.path, **body})
            scores = [(1.0 if "car" in text else 0.1, n) for n, text in enumerate(body["documents"])]
            results = [{"index": n, "relevance_score": score} for score, n in sorted(scores, reverse=True)]
            out = json.dumps({"id": "r1", "results": results, "meta": {"billed_units": {"search_units": 1}}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", asked
    server.shutdown()
    thread.join(timeout=10)


def test_the_reranker_reorders_the_fused_passages_through_litellm(
    user: Any, make_base: Any, add_document: Any, rerank_server: Any
) -> None:
    url, asked = rerank_server
    _configure(rerank_model="cohere/rerank-english-v3.0", rerank_api_base=url, rerank_api_key="test-key")
    base = make_base(user)
    add_document(base, "files.md", DELETING)
    travel = add_document(base, "travel.md", TRAVEL)

    result = _search(user, "remove a file car")

    assert result["retrieval"] == "hybrid + rerank" and "reranker" in result["note"]
    assert result["passages"][0]["document"] == f"d{travel.pk}"
    (call,) = asked
    assert call["path"].endswith("/rerank") and call["query"] == "remove a file car"
    assert len(call["documents"]) == 2


def test_a_failing_reranker_keeps_the_fused_order(user: Any, make_base: Any, add_document: Any) -> None:
    _configure(rerank_model="cohere/rerank-english-v3.0", rerank_api_base="http://127.0.0.1:9", rerank_api_key="x")
    base = make_base(user)
    add_document(base, "files.md", DELETING)
    add_document(base, "travel.md", TRAVEL)

    result = _search(user, "remove a file car")

    assert result["retrieval"] == "hybrid" and "reranker failed" in result["note"]
    assert result["count"] == 2


def test_the_card_summary_names_the_mode(user: Any, make_base: Any, add_document: Any) -> None:
    from knowledge.tools import search_knowledge

    add_document(make_base(user), "network.md", PROXY)
    keyword = _search(user, "proxy")
    _configure()
    embedding.fill()
    hybrid_result = _search(user, "proxy")

    assert search_knowledge.summarize(keyword).endswith("· keyword")  # type: ignore[misc]
    assert search_knowledge.summarize(hybrid_result) == "1 passage for “proxy” · hybrid"  # type: ignore[misc]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL store")
def test_postgresql_without_pgvector_keeps_vectors_in_the_table(user: Any, make_base: Any, add_document: Any) -> None:
    if pgvector.available():
        pytest.skip("this PostgreSQL server has pgvector (the next test)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone()[0] == 0
    assert "no pgvector" in pgvector.install()
    row = _configure()
    base = make_base(user)
    files = add_document(base, "files.md", DELETING)
    query = _embed(["erase"])[0]
    assert vectors.search(query, [base.pk], row.space) == [files.chunks.get().pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the PostgreSQL store")
def test_postgresql_with_pgvector_ranks_in_the_database_as_numpy_does(
    user: Any, make_base: Any, add_document: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not pgvector.available():
        pytest.skip("this PostgreSQL server has no pgvector (make test-pgvector brings one)")
    row = _configure()
    mine, other = make_base(user, "Mine"), make_base(user, "Other")
    files = add_document(mine, "files.md", DELETING)
    network = add_document(mine, "network.md", PROXY)
    travel = add_document(mine, "travel.md", TRAVEL)
    add_document(other, "files.md", DELETING)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(embedding) FROM knowledge_chunkvector")
        assert cursor.fetchone() == (4, 4)  # every row written got its pgvector column
        # Vectors stored before the server had pgvector are filled in by `knowledge_pgvector`.
        cursor.execute("UPDATE knowledge_chunkvector SET embedding = NULL")
    assert "4 vector(s) filled in" in pgvector.install()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(embedding) FROM knowledge_chunkvector")
        assert cursor.fetchone() == (4,)

    questions = ["erase a file", "remove a file or a car", "network proxy settings", "holiday trip"]
    searches = [
        (query, bases, documents)
        for query in _embed(questions)
        for bases, documents in (([mine.pk], []), ([mine.pk, other.pk], []), ([mine.pk], [travel.pk, network.pk]))
    ]
    in_database = [vectors.search(q, b, row.space, d) for q, b, d in searches]
    # The same searches scored by numpy in this process: the same passages in the same order.
    monkeypatch.setattr(pgvector, "available", lambda: False)
    vectors.forget()
    assert in_database == [vectors.search(q, b, row.space, d) for q, b, d in searches]
    assert in_database[0][0] == files.chunks.get().pk
    monkeypatch.undo()

    # A vector of another size (another model's) never compares; a deleted document leaves none.
    assert vectors.search([1.0, 0.0], [mine.pk], row.space) == []
    gone, document_id = files.chunks.get().pk, files.pk
    files.delete()
    assert gone not in vectors.search(_embed(["erase a file"])[0], [mine.pk], row.space)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_chunkvector WHERE document_id = %s", [document_id])
        assert cursor.fetchone()[0] == 0


def test_the_admin_sets_the_model_keeps_the_key_secret_and_queues_the_reindex(
    admin_client: Any, django_capture_on_commit_callbacks: Any
) -> None:
    url = "/admin/knowledge/retrievalsettings/"
    form = {
        "embedding_model": "openai/text-embedding-3-small",
        "embedding_api_base": "",
        "embedding_api_key": "sk-secret-123456",
        "embedding_params": '{"dimensions": 256}',
        "rerank_model": "",
        "rerank_api_base": "",
        "rerank_api_key": "",
        "mcp_refresh_minutes": "60",
    }
    with django_capture_on_commit_callbacks() as queued:
        response = admin_client.post(url + "add/", form)
    assert response.status_code == 302 and queued
    row = RetrievalSettings.load()
    assert row.embedding_model == "openai/text-embedding-3-small" and row.embedding_api_key == "sk-secret-123456"

    page = admin_client.get(url + "1/change/").content.decode()
    assert "sk-secret-123456" not in page
    admin_client.post(url + "1/change/", {**form, "embedding_api_key": "", "embedding_params": "[1]"})
    assert RetrievalSettings.load().embedding_params == {"dimensions": 256}  # a list is refused
    admin_client.post(url + "1/change/", {**form, "embedding_api_key": "", "embedding_model": "demo/embed"})
    row = RetrievalSettings.load()
    assert row.embedding_model == "demo/embed" and row.embedding_api_key == "sk-secret-123456"
    # The MCP documents' refresh interval: 0 turns it off, a negative one is refused.
    refused = admin_client.post(url + "1/change/", {**form, "embedding_api_key": "", "mcp_refresh_minutes": "-5"})
    assert refused.status_code == 200 and RetrievalSettings.load().mcp_refresh_minutes == 60
    admin_client.post(url + "1/change/", {**form, "embedding_api_key": "", "mcp_refresh_minutes": "0"})
    assert RetrievalSettings.load().mcp_refresh_minutes == 0


def test_dense_search_leaves_out_passages_that_share_nothing_with_the_query(
    user: Any, make_base: Any, add_document: Any
) -> None:
    row = _configure()
    base = make_base(user)
    add_document(base, "travel.md", TRAVEL)

    assert vectors.search(_embed(["erase wipe"])[0], [base.pk], row.space) == []


def test_a_starting_files_worker_queues_the_catch_up_only_with_a_model(
    django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    from knowledge import ingest

    sent: list[str] = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, **_: sent.append(name))
    with django_capture_on_commit_callbacks(execute=True):
        ingest.requeue_unfinished()
    assert embedding.EMBED_TASK not in sent

    RetrievalSettings.objects.filter(pk=1).update(embedding_model="demo/embed")
    RetrievalSettings.forget()
    with django_capture_on_commit_callbacks(execute=True):
        ingest.requeue_unfinished()
    assert sent == [embedding.EMBED_TASK]


def test_the_pgvector_command_says_what_it_did() -> None:
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("knowledge_pgvector", stdout=out)
    if connection.vendor != "postgresql":
        assert "Not PostgreSQL: vectors are scored in each process." in out.getvalue()
    else:
        assert "pgvector" in out.getvalue()
