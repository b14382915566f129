"""social_post: a draft post previewed for its platform, counted against that platform's limit."""

from __future__ import annotations

from typing import Any

from ..base import URL, Component, initial, object_of, text_field

# platform → (its name, its character limit)
PLATFORMS = {
    "linkedin": ("LinkedIn", 3000),
    "x": ("X", 280),
    "mastodon": ("Mastodon", 500),
    "bluesky": ("Bluesky", 300),
}

SCHEMA = object_of(
    ["platform", "author", "text"],
    platform={"type": "string", "enum": list(PLATFORMS)},
    author=text_field(120, "display name"),
    handle=text_field(120, "e.g. @jane"),
    text=text_field(20_000, "the post itself, plain text"),
    url=URL,
)


def prepare(item: dict[str, Any]) -> dict[str, Any]:
    label, limit = PLATFORMS[item["platform"]]
    count = len(item["text"])
    return {
        "post": {
            "platform": item["platform"],
            "platform_label": label,
            "author": item["author"],
            "handle": item.get("handle", ""),
            "initial": initial(item["author"]),
            "text": item["text"],
            "count": count,
            "limit": limit,
            "over": max(0, count - limit),
            "near": count > limit * 0.9,
            "percent": min(100, round(count * 100 / limit)),
            "url": item.get("url"),
        }
    }


component = Component(
    name="social_post",
    description="A draft social media post, previewed for its platform with a character count.",
    schema=SCHEMA,
    template="components/social_post.html",
    label="post preview",
    example={"platform": "linkedin", "author": "Ana Lima", "text": "We just shipped SSO login! 🎉"},
    prepare=prepare,
)
