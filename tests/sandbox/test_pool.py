"""A worker's sessions: one per chat, ended when idle (the next call says so), and the chat's
files laid out for /data from the files storage, gone files removed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.test import override_settings

from sandbox import jail, pool

pytestmark = pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok")


@pytest.fixture
def tmp_path() -> Path:
    # Under the run's data directory: bubblewrap, as the sandbox's user, must reach the folder
    # (pytest's own temporary folders are the owner's only).
    folder = Path(settings.VAR_DIR) / "sandbox-tests" / uuid.uuid4().hex
    folder.mkdir(parents=True)
    return folder


def _stored(name: str, data: bytes) -> str:
    return storages["files"].save(f"test/{name}", ContentFile(data))


def test_the_chats_files_are_laid_out_and_gone_ones_removed(tmp_path: Path) -> None:
    with override_settings(SANDBOX_DIR=tmp_path):
        first = _stored("a.csv", b"a\n1\n")
        second = _stored("b.txt", b"hello")
        folder = pool.stage(
            5, [{"id": 1, "name": "a.csv", "path": first}, {"id": 2, "name": "../b.txt", "path": second}]
        )
        assert sorted(p.name for p in folder.iterdir()) == ["a.csv", "b.txt"]
        assert (folder / "b.txt").read_bytes() == b"hello"
        assert pool.stage(5, [{"id": 2, "name": "b.txt", "path": second}]) == folder
        assert [p.name for p in folder.iterdir()] == ["b.txt"]
        # Two files of one name are both there.
        pool.stage(5, [{"id": 2, "name": "b.txt", "path": second}, {"id": 3, "name": "b.txt", "path": first}])
        assert sorted(p.name for p in folder.iterdir()) == ["b (2).txt", "b.txt"]


def test_an_idle_session_ends_and_the_next_call_says_so(tmp_path: Path) -> None:
    with override_settings(SANDBOX_DIR=tmp_path, SANDBOX_IDLE_S=60):
        data = pool.stage(9, [])
        session, notice = pool.acquire(9, data, had_session=False)
        assert notice == ""
        assert session.run("x = 1", lambda *_: None, lambda: False).ok
        pool.release(session, "")
        again, notice = pool.acquire(9, data, had_session=True)
        assert again is session and notice == ""
        pool.release(again, "")
        assert pool.reap_idle(time.monotonic() + 30) == []
        assert pool.reap_idle(time.monotonic() + 61) == [9]
        assert not session.alive
        fresh, notice = pool.acquire(9, data, had_session=True)
        try:
            assert fresh is not session
            assert notice == (
                "A new session started (the earlier one ended: no call for 1 minute). "
                "Variables from earlier calls are gone."
            )
            output: list[str] = []
            fresh.run("print('x' in globals())", lambda _, text: output.append(text), lambda: False)
            assert "".join(output) == "False\n"
        finally:
            pool.release(fresh, "")
            pool.close_all()


def test_a_session_that_ended_elsewhere_is_reported(tmp_path: Path) -> None:
    with override_settings(SANDBOX_DIR=tmp_path):
        session, notice = pool.acquire(11, pool.stage(11, []), had_session=True)
        try:
            assert notice.startswith("A new session started (the earlier one ended)")
        finally:
            pool.release(session, "")
            pool.close_all()
