"""Loaded with `-p tests.ordering`: the slowest test files run first.

`make test` hands whole files to its parallel workers (`--dist loadfile`), each worker taking the
next file when it is done with one. pytest-xdist's own order (most tests first) put the files
that start processes of their own — a few tests each, minutes of work — at the end, where one
worker ran them for the last five minutes while the others sat idle. Longest first keeps every
worker busy until the end (the classic longest-processing-time rule), so `make test` passes
`--no-loadscope-reorder` to keep this order.

The weights are each file's measured seconds in tests/durations.json; a file missing from it
(a new one) counts a guess per test. `pytest --record-durations` writes the file afresh from the
run it ends (run it with `make test-durations`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
GUESS_PER_TEST_S = 0.4  # the suite's median-ish test: a request or two against the database
_recorded: defaultdict[str, float] = defaultdict(float)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        default=False,
        help="write each test file's seconds in this run to tests/durations.json (the order of later runs)",
    )


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _weights() -> dict[str, float]:
    try:
        found = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in found.items()} if isinstance(found, dict) else {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    weights = _weights()
    counts = Counter(_file(item.nodeid) for item in items)
    first: dict[str, int] = {}
    for position, item in enumerate(items):
        first.setdefault(_file(item.nodeid), position)

    def key(item: pytest.Item) -> tuple[float, int]:
        name = _file(item.nodeid)
        return (-weights.get(name, counts[name] * GUESS_PER_TEST_S), first[name])

    # A stable sort on a key shared by a file's tests keeps each file whole and in its order.
    items.sort(key=key)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist the controller sees every worker's reports here too.
    _recorded[_file(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config: Any = session.config
    if not config.getoption("record_durations") or hasattr(config, "workerinput") or not _recorded:
        return
    DURATIONS.write_text(json.dumps({k: round(v, 1) for k, v in sorted(_recorded.items())}, indent=0) + "\n")
