"""A knowledge base, its documents and their chunks.

A base is its owner's; naming groups shares it with their members (the same group membership
that limits models and toolsets, read fresh on every call). Unlike a model or a toolset, a base
with no groups is private: documents are not for everyone by default.
"""

from __future__ import annotations

import hashlib
import json
import uuid

from django.conf import settings
from django.db import models

from core.crypto import EncryptedTextField
from core.settings_row import SettingsRow
from toolsets.files.storage import files_storage


class KnowledgeBase(models.Model):
    name = models.CharField(max_length=120)
    description = models.CharField(max_length=500, blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="knowledge_bases")
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="knowledge_bases",
        help_text="Members of these groups may search it; none chosen: only its owner.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="knowledge_base_unique_name")]

    def __str__(self) -> str:
        return self.name


def _storage_name(instance: Document, filename: str) -> str:
    # Never the uploaded name: a path of ours that nothing uploaded can steer.
    return f"knowledge/b{instance.base_id}/{uuid.uuid4().hex}"


class Document(models.Model):
    """One source in a base: an uploaded file, a web page or an MCP resource, and how far
    reading it has come. The status lives here, so a worker that dies leaves a row another
    worker picks up again (knowledge.tasks)."""

    class Source(models.TextChoices):
        UPLOAD = "upload", "Upload"
        WEB = "web", "Web page"
        MCP = "mcp", "MCP resource"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        INDEXING = "indexing", "Indexing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="documents")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.UPLOAD)
    # What the document is known by within its base: the uploaded name (with its folder inside
    # a zip), the page's address, the resource's URI. A new upload under the same name replaces it.
    reference = models.CharField(max_length=1000)
    title = models.CharField(max_length=300)
    file = models.FileField(upload_to=_storage_name, storage=files_storage, max_length=200, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    content_hash = models.CharField(max_length=64, blank=True)
    # The hash the chunks were made from: equal to content_hash once indexed, so an unchanged
    # upload is skipped and a changed one indexed again.
    indexed_hash = models.CharField(max_length=64, blank=True, editable=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)  # 0 to 1
    error = models.CharField(max_length=500, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0, editable=False)
    claimed_at = models.DateTimeField(null=True, blank=True, editable=False)
    kind = models.CharField(max_length=20, blank=True)  # what the reader found: pdf, markdown…
    pages = models.PositiveIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0)
    # When its source was last read (an MCP resource's refresh looks at it: knowledge.refresh).
    checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["reference", "id"]
        constraints = [models.UniqueConstraint(fields=["base", "reference"], name="knowledge_document_unique_ref")]
        indexes = [models.Index(fields=["status", "claimed_at"]), models.Index(fields=["source", "checked_at"])]

    def __str__(self) -> str:
        return self.title

    @property
    def shown_name(self) -> str:
        """What its lists call it: the name or address it came by; an MCP resource's title
        ("Server: uri"), since its reference is an internal key."""
        return self.title if self.source == self.Source.MCP else self.reference

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.READY, self.Status.FAILED)


class Chunk(models.Model):
    """A passage of a document, with the headings it sits under (its context) and its place."""

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    # Copied from the document: searches filter on it without a join.
    base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="+")
    position = models.PositiveIntegerField()
    heading = models.CharField(max_length=500, blank=True)  # "Install › Settings › Proxy"
    page = models.PositiveIntegerField(null=True, blank=True)
    text = models.TextField()

    class Meta:
        ordering = ["document", "position"]
        constraints = [models.UniqueConstraint(fields=["document", "position"], name="knowledge_chunk_unique_pos")]
        indexes = [models.Index(fields=["base"])]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.position}"


class ChatBase(models.Model):
    """A base attached to a chat: that chat's searches look in its attached bases only."""

    chat = models.ForeignKey("chat.Chat", on_delete=models.CASCADE, related_name="knowledge_links")
    base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="chat_links")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["chat", "base"], name="knowledge_chatbase_unique")]

    def __str__(self) -> str:
        return f"{self.chat_id} → {self.base_id}"


class RetrievalSettings(SettingsRow):
    """How the Knowledge tools search, edited by an admin (a single row). With no embedding
    model, search is by keyword alone; naming one embeds every passage (the files worker does
    it, and does it again for every passage when the model changes) and makes search hybrid."""

    embedding_model = models.CharField(
        "embedding model",
        max_length=200,
        blank=True,
        help_text="Any LiteLLM embedding model, e.g. openai/text-embedding-3-small, ollama/nomic-embed-text, "
        "demo/embed (offline, for trying it out). Empty: keyword search only.",
    )
    embedding_api_base = models.URLField("embedding API base", max_length=500, blank=True)
    embedding_api_key = EncryptedTextField("embedding API key", blank=True)
    embedding_params = models.JSONField(
        "embedding parameters", default=dict, blank=True, help_text='Passed to LiteLLM as is, e.g. {"dimensions": 512}.'
    )
    rerank_model = models.CharField(
        "reranker",
        max_length=200,
        blank=True,
        help_text="Optional: a LiteLLM rerank model (e.g. cohere/rerank-v3.5) that reorders the hybrid "
        "search's passages. Used only with an embedding model.",
    )
    rerank_api_base = models.URLField("reranker API base", max_length=500, blank=True)
    rerank_api_key = EncryptedTextField("reranker API key", blank=True)
    mcp_refresh_minutes = models.PositiveIntegerField(
        "MCP resource refresh (minutes)",
        default=60,
        help_text="How often documents read from MCP resources are read again (changed ones are indexed "
        "again, unchanged ones left as they are). 0: never on its own; owners can still refresh a base.",
    )

    CACHE_KEY = "knowledge-retrieval"

    class Meta:
        verbose_name = verbose_name_plural = "knowledge search settings"

    def __str__(self) -> str:
        return "Knowledge search settings"

    @property
    def space(self) -> str:
        """What the stored vectors were made by: a change of model, server or parameters makes
        every vector stale (vectors of two models cannot be compared)."""
        if not self.embedding_model:
            return ""
        key = json.dumps([self.embedding_model, self.embedding_api_base, self.embedding_params], sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]


class ChunkVector(models.Model):
    """A passage's embedding: float32 values, little-endian. It goes with its passage, document
    or base, in the same transaction (a deleted document is never found by meaning either)."""

    chunk = models.OneToOneField(Chunk, on_delete=models.CASCADE, related_name="vector")
    # Copied from the passage: searches filter on them without a join.
    base = models.ForeignKey(KnowledgeBase, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    space = models.CharField(max_length=16)  # RetrievalSettings.space of the model that made it
    vector = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["base", "space"])]

    def __str__(self) -> str:
        return f"vector of {self.chunk_id}"
