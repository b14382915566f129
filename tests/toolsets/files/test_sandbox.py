from __future__ import annotations

import pytest

from toolsets.files.extract import ExtractError, Limits
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
