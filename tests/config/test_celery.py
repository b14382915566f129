"""Which workers run turns: not one that consumes only the files or sandbox queues."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from config.celery import runs_turns


def _worker(*queues: str) -> SimpleNamespace:
    return SimpleNamespace(amqp=SimpleNamespace(queues=SimpleNamespace(consume_from={q: None for q in queues})))


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        (("celery", "files", "sandbox"), True),  # no -Q: every queue
        (("celery",), True),
        (("doomed",), True),
        (("files",), False),
        (("sandbox", "sandbox.tessera-sandbox@host-1"), False),
        (("files", "sandbox"), False),
    ],
)
def test_only_workers_on_a_turn_queue_run_turns(queues: tuple[str, ...], expected: bool) -> None:
    assert runs_turns(_worker(*queues)) is expected  # type: ignore[arg-type]
