"""The scale-out suite runs on its own (`make test` leaves it out: see pyproject.toml) against a
PostgreSQL server and a Redis server, as a scaled-out deployment would run:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tessera_scaleout \\
    REDIS_URL=redis://127.0.0.1:6379/13 .venv/bin/python -m pytest tests/scaleout

pytest-django creates the test database (`test_` + the name) and drops it at the end; the suite
removes what its processes left in Redis.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Browser, Page

# The browser tests' fixtures: one Chromium for the run, and the user "ada" pages sign in as.
from tests.e2e.conftest import browser, browser_page, e2e_user, wait_socket  # noqa: F401

from .cluster import Cluster


@pytest.fixture(scope="session")
def cluster(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql") or not os.environ.get("REDIS_URL"):
        pytest.fail(
            "The scale-out suite runs against PostgreSQL and a Redis server: set DATABASE_URL=postgres://… "
            "and REDIS_URL=redis://…/N (a database number of its own)",
            pytrace=False,
        )
    cluster = Cluster(tmp_path_factory.mktemp("scaleout"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def running(cluster: Cluster) -> Cluster:
    """The cluster with every process up (an earlier test may have killed or pinned some)."""
    cluster.ensure_running()
    return cluster


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    # What the processes said, in the report of a test that failed.
    cluster = getattr(item, "funcargs", {}).get("running")
    if report.when == "call" and report.failed and cluster is not None:
        for name in cluster.names():
            report.sections.append((f"log of {name}", cluster.log_tail(name)))
    return report


SignedIn = Callable[..., Page]


@pytest.fixture
def signed_in(browser: Browser, running: Cluster, e2e_user: Any) -> Iterator[SignedIn]:  # noqa: F811
    """`signed_in("web-2")`: a browser of its own, signed in through that web process.
    `allow_console` as in `browser_page` (a restarted web process makes the browser log the
    refused reconnects)."""
    with ExitStack() as pages:

        def open_page(web: str, allow_console: tuple[str, ...] = ()) -> Page:
            return pages.enter_context(browser_page(browser, running.url(web), allow_console=allow_console))

        yield open_page


def visit(page: Page, chat_id: int) -> None:
    """Opens a chat on the page's web process and waits for its socket."""
    page.goto(f"{page.base_url}/chats/{chat_id}/")  # type: ignore[attr-defined]
    wait_socket(page)
