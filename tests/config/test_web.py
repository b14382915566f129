"""The web process's socket compression (config/web.py)."""

from __future__ import annotations

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
