"""Static files (config/settings.py): without DEBUG, minified, named by their content's hash,
compressed and cached for a year; with DEBUG=true, the sources as they are, no build needed.
And nothing on a page waits for a request it does not need before its first paint."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import brotli
import pytest
from django.conf import settings
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]


def links(html: str) -> list[str]:
    return re.findall(r'(?:href|src)="(/static/[^"]+)"', html)


@pytest.fixture
def page(client: Client, db: Any) -> Any:
    return client.get("/login/")


def test_a_page_names_minified_hashed_files(page: Any, client: Client) -> None:
    found = links(page.content.decode())
    assert found, "the page loads no static file"
    for url in found:
        assert re.search(r"\.[0-9a-f]{12}\.(css|js|svg)$", url), f"{url} is not named by its content's hash"
    stylesheet = next(url for url in found if url.endswith(".css"))
    css = b"".join(client.get(stylesheet).streaming_content).decode()  # type: ignore[attr-defined]
    # One stylesheet, the imports inlined, minified.
    assert "@import" not in css and "/*" not in css and "\n  " not in css
    assert ".turn{" in css and ".hl-k{" in css and ".attach-tray{" in css  # app, highlight, files
    script = next(url for url in found if "/js/chat." in url)
    js = b"".join(client.get(script).streaming_content).decode()  # type: ignore[attr-defined]
    source = (ROOT / "static" / "js" / "chat.js").read_text()
    assert len(js) < len(source) / 1.5 and "// " not in js


def test_hashed_files_are_compressed_and_cached_for_a_year(page: Any, client: Client) -> None:
    stylesheet = next(url for url in links(page.content.decode()) if url.endswith(".css"))
    plain = b"".join(client.get(stylesheet).streaming_content)  # type: ignore[attr-defined]
    for encoding, decompress in (("gzip", gzip.decompress), ("br", brotli.decompress)):
        response = client.get(stylesheet, HTTP_ACCEPT_ENCODING=encoding)
        assert response["Content-Encoding"] == encoding
        assert decompress(b"".join(response.streaming_content)) == plain  # type: ignore[attr-defined]
        cache = response["Cache-Control"]
        assert "immutable" in cache and int(re.search(r"max-age=(\d+)", cache)[1]) >= 365 * 86400  # type: ignore[index]


def test_nothing_before_the_first_paint_but_the_stylesheet(page: Any) -> None:
    head = page.content.decode().split("</head>", 1)[0]
    assert len(re.findall(r"<link[^>]+rel=\"stylesheet\"", head)) == 1
    for tag in re.findall(r"<script\b[^>]*>", head):
        # Scripts from files wait for the document; the inline one (the theme) carries the nonce.
        assert " defer" in tag or ("src=" not in tag and "nonce=" in tag), tag
    nonce = re.search(r'<script nonce="([^"]+)"', head)
    assert nonce and f"'nonce-{nonce[1]}'" in page["Content-Security-Policy"]
    # Every image is sized, so nothing moves when it arrives.
    for tag in re.findall(r"<(?:img|svg)\b[^>]*>", page.content.decode()):
        assert "width=" in tag and "height=" in tag, tag


# With DEBUG=true a page links the sources themselves, served from where they lie.
DEBUG_SCRIPT = """
import json
import django
django.setup()
from django.template.loader import render_to_string
from django.test import Client, RequestFactory
from django.test.utils import setup_test_environment
setup_test_environment()
client = Client()
page = render_to_string("base.html", request=RequestFactory().get("/"))
found = {}
for url in ("/static/css/tessera.css", "/static/css/app.css", "/static/vendor/htmx/htmx.min.js", "/static/js/chat.js"):
    response = client.get(url)
    found[url] = [response.status_code, b"".join(response.streaming_content).decode()[:2000]]
print(json.dumps({"page": page, "files": found}))
"""


def test_debug_serves_the_sources_without_a_build(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "DEBUG": "true",
        # Nowhere near the built files: development needs none.
        "STATIC_ROOT": str(tmp_path / "static"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", DEBUG_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "/static/css/tessera.css" in links(found["page"])
    for url, (status, _) in found["files"].items():
        assert status == 200, url
    assert '@import "app.css";' in found["files"]["/static/css/tessera.css"][1]
    assert found["files"]["/static/js/chat.js"][1].startswith("// Tessera chat page behaviour.")


def test_the_stack_serves_what_was_built(page: Any) -> None:
    """The files the pages name are the ones `manage.py buildstatic` collected."""
    manifest = json.loads((Path(settings.STATIC_ROOT) / "staticfiles.json").read_text())["paths"]
    for url in links(page.content.decode()):
        assert url.removeprefix("/static/") in manifest.values()


NO_BUILD_SCRIPT = """
import django
django.setup()
from django.urls import reverse
# What a test's collection or a management command does before any build: resolve URLs.
print(reverse("login"))
"""


def test_the_urls_load_before_anything_is_built(tmp_path: Path) -> None:
    # A fresh clone has no manifest yet; importing the URLs must not read it (a process that read
    # it early would keep it, stale, after the build).
    env = {
        **os.environ,
        "DEBUG": "false",
        "STATIC_ROOT": str(tmp_path / "static"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", NO_BUILD_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "/login/"


def test_the_favicon_is_the_hashed_logo(client: Client) -> None:
    response = client.get("/favicon.ico")
    assert response.status_code == 301
    assert re.fullmatch(r"/static/img/logo\.[0-9a-f]{12}\.svg", response["Location"]), response["Location"]
