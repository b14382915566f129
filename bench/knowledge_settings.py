"""Tessera's settings for bench/knowledge.py: an in-process cache instead of Redis (the
benchmark runs no services), everything else as configured."""

from __future__ import annotations

from config.settings import *  # noqa: F403

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
