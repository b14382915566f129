from __future__ import annotations

import pytest

from core.documents.extract import ExtractError, Limits
from toolsets.files.sandbox import run

from . import samples


def test_the_child_process_reads_a_file() -> None:
    result = run(samples.pdf(["Hello", "World"]), "pdf", "a.pdf", Limits(), timeout_s=30)
    assert result.kind == "pdf" and result.page_starts == [0, 7] and result.text == "Hello\n\nWorld"


def test_an_image_thumbnail_comes_back_from_the_child() -> None:
    result = run(samples.image(), "image", "a.png", Limits(), timeout_s=30)
    assert result.thumbnail and result.facts["format"] == "PNG"


def test_errors_come_back_as_errors() -> None:
    with pytest.raises(ExtractError, match="UTF-8"):
        run(b"ok \xff\xfd" + b"x" * 10, "text", "a.txt", Limits(), timeout_s=30)


def test_a_file_that_takes_too_long_is_stopped() -> None:
    # The page tree understates a million pages: walking it takes seconds, past a 1 s limit.
    with pytest.raises(ExtractError, match=r"longer than 1 seconds|more time or memory|beyond what"):
        run(samples.million_page_pdf(declared=1), "pdf", "a.pdf", Limits(), timeout_s=1)


def test_a_child_that_writes_without_end_is_stopped_at_the_output_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a worker holds of a child's output is bounded, whatever the child does."""
    import subprocess
    import sys
    import time

    from toolsets.files import sandbox

    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    real_popen = subprocess.Popen

    def popen(command: list[str], **kwargs: object) -> object:
        return real_popen(endless, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("toolsets.files.sandbox.subprocess.Popen", popen)
    started = time.monotonic()
    with pytest.raises(ExtractError, match="more text than Tessera keeps"):
        run(b"hello", "text", "a.txt", Limits(max_chars=1000), timeout_s=30)
    assert time.monotonic() - started < 10
    assert sandbox.output_limit(Limits(max_chars=1000)) == 6000 + sandbox.OUTPUT_SLACK


def test_a_child_killed_for_memory_fails_its_file_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolsets.files import sandbox

    monkeypatch.setattr(sandbox, "MEMORY_MB", 40)  # too little even to start the reader
    with pytest.raises(ExtractError, match=r"more time or memory|more memory"):
        run(samples.pdf(["Hello"]), "pdf", "a.pdf", Limits(), timeout_s=30)


def test_input_larger_than_a_pipe_reaches_the_child() -> None:
    text = ("word " * 400_000).encode()  # 2 MB: more than a pipe holds while the child works
    result = run(text, "text", "a.txt", Limits(), timeout_s=30)
    assert len(result.text) == len(text)
