from __future__ import annotations

from knowledge.chunking import LONGEST, TARGET, chunk


def test_headings_become_the_context_of_the_passages_under_them() -> None:
    text = "Intro.\n\n# Install\n\nRun the installer.\n\n## Proxy\n\nSet HTTP_PROXY first.\n\n# Usage\n\nOpen it."

    found = [(p.heading, p.text) for p in chunk(text)]

    assert found == [
        ("", "Intro."),
        ("Install", "Run the installer."),
        ("Install › Proxy", "Set HTTP_PROXY first."),
        ("Usage", "Open it."),
    ]


def test_a_hash_inside_a_code_fence_is_not_a_heading() -> None:
    text = "# Shell\n\n```\n# a comment\necho hi\n```"

    (passage,) = chunk(text)

    assert passage.heading == "Shell"
    assert "# a comment" in passage.text


def test_paragraphs_are_packed_and_long_ones_cut_at_sentences() -> None:
    sentence = "The quick brown fox jumps over the lazy dog. "
    text = "\n\n".join([sentence * 3] * 20) + "\n\n" + sentence * 100

    passages = chunk(text)

    assert all(len(p.text) <= LONGEST + TARGET for p in passages)
    assert len(passages) > 5
    assert all(p.text.endswith(".") for p in passages)  # never cut mid-sentence


def test_a_word_longer_than_a_passage_is_cut() -> None:
    passages = chunk("x" * (LONGEST * 3))

    assert "".join(p.text for p in passages) == "x" * (LONGEST * 3)


def test_pdf_pages_are_kept_with_each_passage() -> None:
    first, second = "Page one text. " * 50, "Page two text. " * 50
    text = f"{first.strip()}\n\n{second.strip()}"

    passages = chunk(text, [0, len(first) + 1])

    assert [(p.page, p.text[:8]) for p in passages] == [(1, "Page one"), (2, "Page two")]
