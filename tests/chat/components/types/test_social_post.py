from __future__ import annotations

import pytest

from chat.components import render

from ..helpers import block


@pytest.mark.parametrize(("platform", "limit"), [("linkedin", 3000), ("x", 280), ("mastodon", 500), ("bluesky", 300)])
def test_social_post_counts_characters_against_the_platform_limit(platform: str, limit: int) -> None:
    post = {"platform": platform, "author": "Ana", "handle": "@ana", "text": "a" * (limit + 5)}

    html = render(block("social_post", post))

    assert f"{limit + 5} / {limit} characters" in html
    assert "5 over the" in html
    assert "is-over" in html
    assert "is-over" not in render(block("social_post", {**post, "text": "short"}))


def test_social_post_platform_names_are_case_insensitive() -> None:
    assert "gu-post-x" in render(block("social_post", {"platform": "X", "author": "a", "text": "b"}))
