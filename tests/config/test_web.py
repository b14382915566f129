"""The web process's socket compression (config/web.py) and event loop (config/reactor.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from autobahn.websocket.compress import PerMessageDeflateOffer

from config.web import MEM_LEVEL, WINDOW_BITS, accept_deflate


def test_a_browsers_deflate_offer_is_accepted_with_a_small_window() -> None:
    # What Chromium sends: "permessage-deflate; client_max_window_bits".
    offer = PerMessageDeflateOffer(accept_max_window_bits=True)

    accept = accept_deflate([offer])

    assert accept is not None
    assert accept.window_bits == WINDOW_BITS
    assert accept.mem_level == MEM_LEVEL
    assert accept.request_max_window_bits == WINDOW_BITS
    assert accept.get_extension_string() == f"permessage-deflate; client_max_window_bits={WINDOW_BITS}"


def test_a_client_asking_for_an_even_smaller_window_gets_it() -> None:
    offer = PerMessageDeflateOffer(accept_max_window_bits=False, request_max_window_bits=10)

    accept = accept_deflate([offer])

    assert accept is not None
    assert accept.window_bits == 10
    assert accept.request_max_window_bits == 0  # this client did not say it can limit its own


def test_no_offer_means_no_compression() -> None:
    assert accept_deflate([]) is None


CHECK_LOOP = """
from config import reactor
reactor.install()
import daphne.server  # installs its own asyncio reactor unless one is there
from twisted.internet import reactor as installed
print(type(installed._asyncioEventloop).__module__)
"""


@pytest.mark.parametrize(("setting", "loop"), [("", "uvloop"), ("false", "asyncio")])
def test_the_web_process_runs_daphne_on_uvloop_unless_told_not_to(setting: str, loop: str) -> None:
    env = {key: value for key, value in os.environ.items() if key != "TESSERA_WEB_UVLOOP"}
    if setting:
        env["TESSERA_WEB_UVLOOP"] = setting
    found = subprocess.run(
        [sys.executable, "-c", CHECK_LOOP], env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip().split(".")[0] == loop, found.stderr
