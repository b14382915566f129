"""Secrets never leave in results: whatever a tool returns or reports passes the redaction of
every credential Tessera holds before the card, the model, the record or the cache see it."""

from __future__ import annotations

from typing import Any

import pytest

from core import redact
from toolsets import registry
from toolsets.base import ToolContext, Toolset, tool
from toolsets.executor import execute
from toolsets.models import ToolExecution

pytestmark = pytest.mark.django_db(transaction=True)

HELD = "held-credential-5Tg8Kp2Qw"


@tool()
def leak(where: str) -> Any:
    """Return a held credential inside text, a nested value or a key."""
    if where == "text":
        return f"the key is {HELD}."
    return {"config": {"token": HELD, HELD: ["and", f"x{HELD}x"]}, "count": 3}


@tool()
def chatty(ctx: ToolContext) -> str:
    """Report progress that quotes a credential."""
    ctx.progress(f"Signing in with {HELD}", 10)
    return "done"


@tool(cache_ttl_s=60)
def lookup(q: str) -> str:
    """A cacheable lookup whose answer quotes a credential."""
    return f"{q}: {HELD}"


@tool()
def quote(text: str) -> str:
    """Return the text, as a server holding someone's token might."""
    return text


TOOLSET = Toolset(id="leaky", name="Leaky", description="", tools=[leak, chatty, lookup, quote])


@pytest.fixture(autouse=True)
def _toolsets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "all_toolsets", lambda: {TOOLSET.id: TOOLSET})
    redact.register(HELD)


async def test_a_text_result_is_redacted_for_the_model_and_the_record(user: Any) -> None:
    done = await execute("toolset__leaky__leak", {"where": "text"}, user_id=user.pk, tool_call_id="c")

    assert done.result == f"the key is {redact.REDACTED}."
    assert HELD not in done.model_content(10_000)
    assert done.record_id is not None
    record = await ToolExecution.objects.aget(pk=done.record_id)
    assert HELD not in str(record.result)


async def test_structured_results_are_redacted_in_values_and_keys(user: Any) -> None:
    done = await execute("toolset__leaky__leak", {"where": "data"}, user_id=user.pk, tool_call_id="c")

    assert done.result == {
        "config": {"token": redact.REDACTED, redact.REDACTED: ["and", f"x{redact.REDACTED}x"]},
        "count": 3,
    }
    assert done.record_id is not None
    record = await ToolExecution.objects.aget(pk=done.record_id)
    assert record.result == done.result


async def test_progress_text_is_redacted(user: Any) -> None:
    seen: list[str] = []

    def progress(text: str, percent: float | None = None) -> None:
        seen.append(text)

    done = await execute("toolset__leaky__chatty", {}, user_id=user.pk, tool_call_id="c", progress=progress)

    assert done.ok and seen == [f"Signing in with {redact.REDACTED}"]


async def test_cached_results_are_stored_and_served_redacted(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from core.redis_client import sync_client

    first = await execute("toolset__leaky__lookup", {"q": "a"}, user_id=user.pk, tool_call_id="c1")
    second = await execute("toolset__leaky__lookup", {"q": "a"}, user_id=user.pk, tool_call_id="c2")

    assert second.cached_at is not None
    assert first.result == second.result == f"a: {redact.REDACTED}"
    redis = sync_client()
    stored = " ".join(str(redis.get(key)) for key in redis.scan_iter("tessera:policy:*"))
    assert redact.REDACTED in stored and HELD not in stored


async def test_a_secret_another_process_stored_is_redacted_too(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result may quote a secret this process never decrypted (another user's token, which an
    MCP server holds): the executor registers every stored secret before a call runs."""
    from asgiref.sync import sync_to_async
    from django.db import connection

    from chat.models import LLMModel
    from core import crypto

    never_held = "stored-elsewhere-Zx81Lq9"
    model = await LLMModel.objects.acreate(name="Other", model="openai/other")

    def store() -> None:  # as another process would: only the ciphertext is here
        with connection.cursor() as cursor:
            table = LLMModel._meta.db_table
            cursor.execute(f"UPDATE {table} SET api_key = %s WHERE id = %s", [crypto.encrypt(never_held), model.pk])

    await sync_to_async(store)()
    assert redact.redact(never_held) == never_held
    monkeypatch.setattr(crypto, "_stored", {"generation": None, "checked": 0.0})

    done = await execute("toolset__leaky__quote", {"text": f"token {never_held}"}, user_id=user.pk, tool_call_id="c")

    assert done.result == f"token {redact.REDACTED}"
