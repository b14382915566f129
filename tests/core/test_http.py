"""The address a request came from (core/http.py): the connection's, or, behind a trusted
proxy, the client's as the proxies report it; a client cannot pick its own. And pages and
fragments compressed, other responses left as they are."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.test import RequestFactory, override_settings

from core.http import CompressPagesMiddleware, client_address


def request(remote: str, forwarded: str | None = None) -> HttpRequest:
    made = RequestFactory().get("/")
    made.META["REMOTE_ADDR"] = remote
    if forwarded is not None:
        made.META["HTTP_X_FORWARDED_FOR"] = forwarded
    return made


def test_without_trusted_proxies_the_connection_is_the_client() -> None:
    assert client_address(request("203.0.113.9", "198.51.100.1")) == "203.0.113.9"


@override_settings(TRUSTED_PROXIES=["10.0.0.0/8", "127.0.0.1"])
@pytest.mark.parametrize(
    ("remote", "forwarded", "client"),
    [
        ("10.0.0.5", "198.51.100.7", "198.51.100.7"),
        # What the client wrote itself comes first; the proxies append the address they saw.
        ("10.0.0.5", "1.2.3.4, 198.51.100.7", "198.51.100.7"),
        ("10.0.0.5", "198.51.100.7, 10.0.0.9", "198.51.100.7"),  # two proxies
        ("127.0.0.1", "2001:db8::1", "2001:db8::1"),
        ("10.0.0.5", None, "10.0.0.5"),  # nothing forwarded: the proxy itself
        ("10.0.0.5", "not-an-ip", "10.0.0.5"),
        ("10.0.0.5", "198.51.100.7, junk", "10.0.0.5"),  # garbage after the client: not believed
        ("203.0.113.9", "198.51.100.7", "203.0.113.9"),  # not a trusted proxy: its header is ignored
        ("", "198.51.100.7", "unknown"),
    ],
)
def test_behind_a_trusted_proxy_the_forwarded_client_counts(remote: str, forwarded: str | None, client: str) -> None:
    assert client_address(request(remote, forwarded)) == client


def test_a_proxy_setting_that_is_not_an_address_stops_the_start() -> None:
    env = {**os.environ, "TESSERA_TRUSTED_PROXIES": "10.0.0.0/8,proxy.example"}
    found = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.returncode != 0
    assert "TESSERA_TRUSTED_PROXIES: 'proxy.example' is not an address or a network." in found.stderr


def compressed(response: HttpResponseBase, accept: str = "gzip, deflate, br") -> Any:
    made = RequestFactory().get("/", HTTP_ACCEPT_ENCODING=accept)
    return CompressPagesMiddleware(lambda request: response)(made)


PAGE = "<!doctype html><title>Chat</title>" + "<div class='turn'><p>An answer, again.</p></div>" * 200


def test_pages_and_fragments_are_gzipped_for_browsers_that_accept_it() -> None:
    import gzip

    page = compressed(HttpResponse(PAGE))
    assert page["Content-Encoding"] == "gzip" and "Accept-Encoding" in page["Vary"]
    assert gzip.decompress(page.content).decode() == PAGE
    assert len(page.content) < len(PAGE) / 10
    assert compressed(JsonResponse({"rows": ["row"] * 100}))["Content-Encoding"] == "gzip"
    assert not compressed(HttpResponse(PAGE), accept="identity").has_header("Content-Encoding")


def test_static_and_stored_files_are_sent_as_they_are(tmp_path: Path) -> None:
    stored = tmp_path / "report.csv"
    stored.write_text("a,b\n" * 500)
    # The file is closed here rather than by `download.close()`, which would send Django's
    # request_finished signal and touch whatever database connection an earlier test left open.
    with stored.open("rb") as handle:
        download = compressed(FileResponse(handle, content_type="text/csv"))
        assert not download.has_header("Content-Encoding")
    image = compressed(HttpResponse(b"\x89PNG" + bytes(4000), content_type="image/png"))
    assert not image.has_header("Content-Encoding")
