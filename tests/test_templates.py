"""Template source rules Django does not enforce itself."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_one_line_comment_spans_lines() -> None:
    # Django's {# … #} ends at the line's end: one left open shows its text on the page.
    # Longer notes go in {% comment %}.
    open_comments = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(ROOT.glob("*/templates/**/*.html")) + sorted(ROOT.glob("templates/**/*.html"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "{#" in line and "#}" not in line[line.index("{#") :]
    ]
    assert not open_comments, open_comments
