"""Cache keys: canonical arguments, who may share a result, and how long it lives."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import redis
from django.conf import settings

from toolsets.base import tool
from toolsets.policy import cache


def key(arguments: dict[str, object], user: int | None = 1, api_key: str = "k", public: bool = False) -> str:
    return cache.key("exa.search", arguments, user_id=user, api_key=api_key, public=public)


def test_argument_order_and_spacing_do_not_matter() -> None:
    assert key({"query": "django", "num_results": 5}) == key({"num_results": 5, "query": "django"})
    assert key({"q": {"a": 1, "b": [1, 2]}}) == key({"q": {"b": [1, 2], "a": 1}})


def test_different_arguments_or_tools_differ() -> None:
    assert key({"query": "django"}) != key({"query": "Django"})
    assert key({"n": 1}) != key({"n": "1"})
    assert key({"n": [1, 2]}) != key({"n": [2, 1]})
    assert cache.key("exa.search", {}, user_id=1, api_key="", public=False) != cache.key(
        "exa.find_similar", {}, user_id=1, api_key="", public=False
    )


def test_users_are_isolated_unless_the_tool_is_public() -> None:
    assert key({"q": "x"}, user=1) != key({"q": "x"}, user=2)
    assert key({"q": "x"}, user=1, public=True) == key({"q": "x"}, user=2, public=True)


def test_credentials_are_isolated_even_when_public() -> None:
    assert key({"q": "x"}, api_key="a", public=True) != key({"q": "x"}, api_key="b", public=True)
    # The key itself never appears in the cache key.
    assert "secret-key" not in key({"q": "x"}, api_key="secret-key")


def test_only_side_effect_free_tools_with_a_cache_time_are_cacheable() -> None:
    assert cache.cacheable(tool(cache_ttl_s=60)(lambda: None))
    assert not cache.cacheable(tool(cache_ttl_s=60)(lambda: None), enabled=False)
    assert not cache.cacheable(tool()(lambda: None))
    assert not cache.cacheable(tool(side_effects=True)(lambda: None))


def test_entries_expire_after_the_declared_time() -> None:
    client = redis.from_url(settings.REDIS_URL)
    at = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
    cache.put(client, key({"q": "ttl"}), {"hits": 3}, ttl_s=1, execution_id=7, at=at)
    hit = cache.get(client, key({"q": "ttl"}))
    assert hit is not None and hit.result == {"hits": 3} and hit.at == at and hit.execution_id == 7
    cache.put(client, key({"q": "long"}), 1, ttl_s=600, execution_id=None)
    assert 590 < client.ttl(key({"q": "long"})) <= 600
    time.sleep(1.2)
    assert cache.get(client, key({"q": "ttl"})) is None


def test_an_unreadable_entry_is_a_miss() -> None:
    client = redis.from_url(settings.REDIS_URL)
    client.set(key({"q": "junk"}), b"not json")
    assert cache.get(client, key({"q": "junk"})) is None
