"""Citations: [n] becomes a chip linked to the turn's Sources list, only for real sources."""

from __future__ import annotations

from chat import citations
from chat.rendering import render_block
from toolsets.sources import SourceBook, safe_http_url, source


def cite(*sources: dict[str, str]) -> dict[int, dict[str, object]]:
    book = SourceBook()
    return citations.by_number(book.add(list(sources)), turn_id=7)


def test_known_numbers_become_chips_and_invented_ones_stay_text() -> None:
    known = cite(source("Django Channels docs", url="https://channels.readthedocs.io/en/latest/"))
    html = citations.link(render_block("Channels adds websockets [1], see also [2] and [x]."), known)
    assert '<sup class="cite"><a href="#src-7-1" aria-label="Source 1: Django Channels docs">1</a></sup>' in html
    assert "[2]" in html and "#src-7-2" not in html and "[x]" in html


def test_code_and_links_are_left_alone() -> None:
    known = cite(source("A", url="https://a.example/"))
    html = citations.link(render_block("`list[1]` and [link [1]](https://b.example/) but [1]"), known)
    assert "<code>list[1]</code>" in html
    assert html.count('class="cite"') == 1


def test_hostile_titles_and_urls_are_escaped_or_dropped() -> None:
    evil = source('"><img src=x onerror=alert(1)>', url="javascript:alert(1)", snippet="<script>x</script>")
    assert evil["url"] == "" and evil["title"].startswith('"><img')
    html = citations.link("<p>fact [1]</p>", cite(evil))
    assert "<img" not in html and "&quot;&gt;&lt;img" in html
    for url in [
        "javascript:alert(1)",
        "data:text/html,x",
        "ftp://x.example/",
        "//x.example/",
        "http://",
        " https://ok.example/x ",
    ]:
        assert safe_http_url(url) in ("", "https://ok.example/x"), url


def test_numbers_are_stable_per_turn_and_shared_by_equal_sources() -> None:
    book = SourceBook()
    first = book.add([source("A", url="https://a.example/"), source("T", kind="Task", key="task:1")])
    again = book.add([source("A again", url="https://a.example/"), source("B", url="https://b.example/")])
    assert [s["n"] for s in first] == [1, 2] and [s["n"] for s in again] == [1, 3]
    assert [s["n"] for s in book.all()] == [1, 2, 3]


def test_source_list_view_and_stored_sources() -> None:
    class Execution:
        sources = [{"n": 2, "title": "B", "url": "", "kind": "Task", "snippet": ""}]

    class Other:
        sources = [{"n": 1, "title": "A", "url": "https://a.example/", "kind": "a.example", "snippet": "s"}]

    found = citations.from_executions([Execution(), Other()])
    assert [s["n"] for s in found] == [1, 2]
    views = citations.source_views(9, found)
    assert views[0]["dom_id"] == "src-9-1" and views[1]["kind"] == "Task"
