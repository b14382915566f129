"""How clients become known to the authorization server (hub/oauth_clients.py): the rules
registration holds an update to (RFC 7592), and the bounds on fetching Client ID Metadata
Documents (one deadline for the whole fetch, a few fetches at once per requesting address),
against a real https server on this machine that drips a document a byte at a time."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from oauth2_provider import cimd
from oauth2_provider.models import Application

from chat.models import AppSettings
from hub import oauth_clients
from tests.documents_server import MetadataServer

REDIRECT = "http://127.0.0.1:8765/callback"
DEADLINE = 1.0
ATTACKER, OTHER = "203.0.113.7", "198.51.100.2"


@pytest.fixture(autouse=True)
def switched_on(db: Any) -> None:
    app = AppSettings.load()
    app.mcp_server = True
    app.save()


# --- RFC 7592 updates --------------------------------------------------------------------------


def _register(client: Client) -> dict[str, Any]:
    body = {"client_name": "Test Desktop", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
    response = client.post("/oauth/register/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    data: dict[str, Any] = response.json()
    return data


def _update(client: Client, registered: dict[str, Any], token: str | None = None, **changes: Any) -> Any:
    body = {"client_name": "Test Desktop", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
    return client.put(
        f"/oauth/register/{registered['client_id']}/",
        {**body, **changes},
        content_type="application/json",
        headers={"Authorization": f"Bearer {token or registered['registration_access_token']}"},
    )


def test_an_update_is_held_to_the_rules_of_registration(client: Client) -> None:
    registered = _register(client)
    for bad in (
        ["http://app.example/cb"],  # plain http to a remote host: registration refuses it
        ["javascript:alert(1)"],
        ["https://app.example/cb#frag"],
        [],
        [3],
    ):
        response = _update(client, registered, redirect_uris=bad)
        assert response.status_code == 400, (bad, response.content)
        assert response.json()["error"] == "invalid_redirect_uri"
    for changes in ({"grant_types": ["client_credentials"]}, {"response_types": ["token"]}, {"client_name": 5}):
        response = _update(client, registered, **changes)
        assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata", changes
    application = Application.objects.get(client_id=registered["client_id"])
    assert application.redirect_uris == REDIRECT  # nothing was changed

    # A good update goes through; one without the registration token is a 401, whatever it holds.
    assert _update(client, registered, token="wrong", redirect_uris=["http://app.example/cb"]).status_code == 401
    good = _update(client, registered, redirect_uris=["https://app.example/cb"], client_name="Renamed")
    assert good.status_code == 200, good.content
    application.refresh_from_db()
    assert (application.redirect_uris, application.name) == ("https://app.example/cb", "Renamed")


def test_registration_and_update_share_one_check() -> None:
    assert oauth_clients.metadata_problem({"redirect_uris": ["https://a.example/cb"]}) is None
    assert oauth_clients.metadata_problem({"redirect_uris": ["http://a.example/cb"]}) is not None
    # Unhashable list items are a 400, not a crash.
    assert oauth_clients.metadata_problem({"redirect_uris": [REDIRECT], "grant_types": [[1]]}) is not None


# --- Client ID Metadata Documents ----------------------------------------------------------------


@pytest.fixture
def documents(tmp_path: Path, settings: Any) -> Iterator[MetadataServer]:
    server = MetadataServer(tmp_path)
    settings.OAUTH_CIMD_ALLOW_LOOPBACK = True
    settings.OAUTH_CIMD_CA_FILE = str(server.cert)
    settings.OAUTH_CIMD_FETCH_SECONDS = DEADLINE
    yield server
    server.close()


def _path() -> str:
    # A fresh URL each time: DOT backs a failed URL off in the (shared) cache.
    return f"/clients/{secrets.token_hex(6)}.json"


@pytest.mark.timeout(30)
def test_a_dripping_document_is_given_up_at_the_deadline(documents: MetadataServer) -> None:
    path = _path()
    client_id = documents.document(path, REDIRECT)
    documents.drip.add(path)
    started = time.monotonic()
    with pytest.raises(cimd.CIMDError, match="within"):
        oauth_clients.MetadataFetcher().fetch(client_id)
    # Every byte came within any per-read timeout; only a deadline over the whole fetch ends it.
    assert time.monotonic() - started < DEADLINE + 1.0
    # The same document served at once is fetched fine.
    fast = _path()
    document, _ = oauth_clients.MetadataFetcher().fetch(documents.document(fast, REDIRECT))
    assert document["client_id"] == documents.base + fast


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_slow_documents_from_one_address_never_lock_other_clients_out(
    documents: MetadataServer, settings: Any, user: Any
) -> None:
    settings.OAUTH_CIMD_FETCHES_PER_ADDRESS = 2
    # Long enough that the two held fetches are still dripping when the other eight are
    # answered, however slowly a loaded machine starts ten threads.
    deadline = 8.0
    settings.OAUTH_CIMD_FETCH_SECONDS = deadline
    # Ten anonymous token requests from one address, each naming a document that drips.
    statuses: list[int] = []

    def hostile() -> None:
        path = _path()
        documents.drip.add(path)
        client_id = documents.document(path, REDIRECT)
        response = Client(REMOTE_ADDR=ATTACKER).post(
            "/oauth/token/",
            {"grant_type": "authorization_code", "code": "x", "client_id": client_id, "redirect_uri": REDIRECT},
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=hostile) for _ in range(10)]
    for thread in threads:
        thread.start()
    documents.wait_for_drips(2)
    # The address's other requests are answered while the two still drip, with a clear 429.
    until = time.monotonic() + deadline - 1.0
    while len(statuses) < 8 and time.monotonic() < until:
        time.sleep(0.05)
    assert sorted(statuses) == [429] * 8, statuses
    assert documents.dripping <= 2

    # Meanwhile a well-behaved client is known at once to a user at another address.
    good = documents.document(_path(), REDIRECT, name="Good Client")
    browser = Client(REMOTE_ADDR=OTHER)
    browser.force_login(user)
    page = browser.get(
        "/oauth/authorize/",
        {
            "response_type": "code",
            "client_id": good,
            "redirect_uri": REDIRECT,
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
            "code_challenge_method": "S256",
            "state": "s",
        },
    )
    assert page.status_code == 200 and b"Good Client" in page.content, page.content[:300]

    for thread in threads:
        thread.join(deadline + 10)
    # The two fetched ones ended at the deadline: an unknown client.
    assert sorted(statuses) == [401, 401] + [429] * 8, statuses
