"""The official MCP conformance suite's server scenarios against Tessera's /mcp, served by the
real stack (Daphne and a Celery worker on Redis).

The suite has no way to send credentials, and /mcp wants an API token: it talks to /mcp through
`proxy.AuthProxy`, which adds the user's `Authorization: Bearer` header and changes nothing else.
Every scenario passes, or is listed with its reason in expected-failures.yml (run.report fails on
an unlisted failure, on a listed scenario that passes, and when no check ran).

Not part of `make test` (pyproject ignores tests/conformance): `make conformance` runs it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from chat.models import AppSettings
from hub.models import ApiToken

from . import proxy
from .run import expected_failures, read_checks, report, scenarios, suite

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.mark.timeout(900)
def test_the_server_scenarios_pass_against_tessera(stack: Any, user: Any, tmp_path: Path) -> None:
    settings = AppSettings.load()
    settings.mcp_server = True
    settings.save()
    token = ApiToken.issue(user, "conformance")[1]
    names = scenarios("Server")
    results = tmp_path / "results"
    with proxy.running(stack.url, token) as url:
        # Every scenario the suite lists, pending ones included (the default leaves those out).
        done = suite("server", "--url", f"{url}/mcp", "--suite", "all", "-o", str(results), timeout=900)
    outcomes = []
    for name in names:
        folders = [p for p in results.iterdir() if re.fullmatch(rf"server-{re.escape(name)}-\d.*", p.name)]
        assert folders, f"the suite ran no {name} scenario:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
        outcomes.append(read_checks(folders[0], "", name))
    assert report("server", outcomes, expected_failures("server")) == 0, done.stdout[-6000:]
