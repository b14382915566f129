from __future__ import annotations

from chat.search import query


def test_terms_are_letter_and_digit_runs_lowercased_and_distinct() -> None:
    assert query.terms('Budget "Q3" budget_plan -- OR NOT*') == ["budget", "q3", "plan", "or", "not"]


def test_terms_drop_syntax_characters_nul_and_markup() -> None:
    assert query.terms("\"'*():^-+\x00<script>") == ["script"]
    assert query.terms("\x00\x00") == []
    assert query.terms("") == []


def test_terms_are_capped_in_number_length_and_query_size() -> None:
    assert len(query.terms(" ".join(f"w{i}" for i in range(50)))) == query.MAX_TERMS
    assert query.terms("x" * 500) == ["x" * query.MAX_TERM]
    assert query.terms("a " * 150 + "zebra") == ["a"]  # past MAX_QUERY characters


def test_database_queries_quote_every_term_as_a_prefix() -> None:
    assert query.fts5_query(["tokyo", "time"]) == '"tokyo"* AND "time"*'
    assert query.tsquery(["tokyo", "time"]) == "'tokyo':* & 'time':*"


def test_highlight_escapes_text_and_marks_word_starts() -> None:
    html = query.highlight("<b>Tokyo</b> & tokens", ["tok"])
    assert html == "&lt;b&gt;<mark>Tok</mark>yo&lt;/b&gt; &amp; <mark>tok</mark>ens"


def test_highlight_marks_only_word_starts() -> None:
    assert query.highlight("stock tokyo", ["tok"]) == "stock <mark>tok</mark>yo"


def test_snippet_is_a_window_around_the_first_match() -> None:
    text = "word " * 100 + "the needle is here " + "tail " * 100
    html = query.snippet(text, ["needle"])
    assert html.startswith("…") and html.endswith("…")
    assert "<mark>needle</mark>" in html
    assert len(html) < query.SNIPPET_LENGTH + 40


def test_snippet_without_a_visible_match_shows_the_start() -> None:
    assert query.snippet("first line\n\nsecond <i>", ["zzz"]) == "first line second &lt;i&gt;"
