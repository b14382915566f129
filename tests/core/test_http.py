"""The address a request came from (core/http.py): the connection's, or, behind a trusted
proxy, the client's as the proxies report it; a client cannot pick its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.http import HttpRequest
from django.test import RequestFactory, override_settings

from core.http import client_address


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
