"""Markdown the demo model writes: final answers from tool results and canned replies."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .intents import CLOCK_MATH, EXA, WEB, Intent

TOOLSET_LABELS: dict[str, str] = {
    CLOCK_MATH: "Clock & Math",
    EXA: "Exa search",
    WEB: "Web",
}

TOOL_PURPOSES: dict[str, str] = {
    "current_time": "telling the time",
    "calculate": "arithmetic",
    "search": "web search and news",
    "fetch_page": "reading web pages",
}

_UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z"}


@dataclass(frozen=True)
class ToolResult:
    """A tool message paired with the call that produced it."""

    name: str
    arguments: dict[str, Any]
    content: str


# --- small formatting helpers ----------------------------------------------


def tool_suffix(name: str) -> str:
    return name.rsplit("__", 1)[-1]


def _quote(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1].rstrip() + "…"
    return flat


def _blockquote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.strip().splitlines())


def _inline_code(text: str) -> str:
    # A backtick inside would end the code span early and spill raw text into the answer.
    return f"`{text.replace('`', "'")}`"


def _link_text(text: str) -> str:
    return re.sub(r"([\[\]])", r"\\\1", " ".join(text.split()))


def _is_web_url(value: object) -> bool:
    # Only http(s) links become clickable: a "javascript:" URL from a tool must stay inert text.
    return isinstance(value, str) and re.match(r"https?://", value, re.IGNORECASE) is not None


def _join_phrases(phrases: Sequence[str]) -> str:
    if len(phrases) == 1:
        sentence = phrases[0]
    elif len(phrases) == 2:
        sentence = f"{phrases[0]}, and {phrases[1]}"
    else:
        sentence = ", ".join(phrases[:-1]) + f", and {phrases[-1]}"
    if sentence[:1].isalpha():
        sentence = sentence[0].upper() + sentence[1:]
    return sentence + "."


def _format_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def pretty_expression(expression: str) -> str:
    """'12*7' -> '12 × 7': spaced operators read better in a chat answer."""
    symbols = {"*": "×", "/": "÷", "+": "+", "-": "-", "^": "^", "%": "mod", "**": "^"}
    # An operator counts as binary only after an operand; "-3" keeps its sign glued on.
    return re.sub(
        r"(?<=[\d.)])\s*(\*\*|[-+*/^%])\s*",
        lambda m: f" {symbols[m.group(1)]} ",
        expression,
    )


def place_name(timezone: str) -> str:
    """'America/New_York' -> 'New York'."""
    return timezone.rsplit("/", 1)[-1].replace("_", " ")


def summarize_json(value: Any, limit: int = 200) -> str:
    """A one-line view of an unknown result, short enough to sit inside a sentence."""
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if isinstance(item, dict | list):
                shown = f"[{len(item)} items]" if isinstance(item, list) else "{…}"
            else:
                shown = json.dumps(item, ensure_ascii=False)
            parts.append(f"{key}: {shown}")
        text = ", ".join(parts)
    elif isinstance(value, list):
        text = f"a list of {len(value)} items"
    else:
        text = json.dumps(value, ensure_ascii=False)
    return _quote(text, limit)


def first_sentences(text: str, count: int = 2, limit: int = 400) -> str:
    flat = " ".join(text.split())
    sentences = re.split(r"(?<=[.!?])\s+", flat)
    return _quote(" ".join(sentences[:count]), limit)


# --- per-tool rendering ------------------------------------------------------


def _time_phrase(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    display = result.get("display")
    if not display and isinstance(result.get("iso"), str):
        match = re.search(r"T(\d{2}:\d{2})", result["iso"])
        display = match.group(1) if match else None
    if not display:
        return None
    zone = str(result.get("timezone") or arguments.get("timezone") or "UTC")
    date = result.get("date")
    if zone in _UTC_NAMES:
        return f"it's **{display}** UTC" + (f" ({date})" if date else "")
    abbreviation = result.get("abbreviation")
    if not abbreviation or not re.search(r"[A-Za-z]", str(abbreviation)):
        # Zones without a letter abbreviation report "+09"; the offset says the same thing clearer.
        offset = result.get("utc_offset")
        abbreviation = f"UTC{offset}" if offset else None
    details = ", ".join(str(part) for part in (abbreviation, date) if part)
    return f"it's **{display}** in {place_name(zone)}" + (f" ({details})" if details else "")


def _calculation_phrase(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "result" not in result:
        return None
    expression = str(result.get("expression") or arguments.get("expression") or "the expression")
    return f"**{pretty_expression(expression)} = {_format_number(result['result'])}**"


def _search_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    items = result.get("results")
    if not isinstance(items, list):
        return None
    query = result.get("query") or arguments.get("query") or "your search"
    if not items:
        return f'The search for "{query}" found nothing.'
    lines = [f'Here\'s what I found for "{query}":', ""]
    for item in items[:5]:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        title = _link_text(str(item.get("title") or url or "Untitled"))
        line = f"- [{title}]({url})" if _is_web_url(url) else f"- {title}"
        published = item.get("published_date") or item.get("publishedDate")
        if published:
            line += f" ({str(published)[:10]})"
        lines.append(line)
    return "\n".join(lines)


def _page_block(result: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    if "text" not in result and "title" not in result:
        return None
    url = result.get("url") or arguments.get("url")
    title = _link_text(str(result.get("title") or url or "The page"))
    heading = f"**[{title}]({url})**" if _is_web_url(url) else f"**{title}**"
    text = first_sentences(str(result.get("text") or ""))
    if not text:
        return f"{heading} has no readable text."
    return f"{heading}: {text}"


_INLINE_RENDERERS = {"current_time": _time_phrase, "calculate": _calculation_phrase}
_BLOCK_RENDERERS = {"search": _search_block, "fetch_page": _page_block}


def _failure_block(tool: str, error: str) -> str:
    return f"The {_inline_code(tool)} tool failed:\n\n{_blockquote(_quote(error, 300))}"


def results_answer(results: Iterable[ToolResult], missing: Sequence[Intent] = ()) -> str:
    """The final answer after tool calls: one sentence of short facts, then longer blocks."""
    phrases: list[str] = []
    blocks: list[str] = []
    for item in results:
        tool = tool_suffix(item.name)
        content = item.content.strip()
        if content.startswith("Error:"):
            blocks.append(_failure_block(tool, content))
            continue
        try:
            data = json.loads(content)
        except ValueError:
            blocks.append(f"The {_inline_code(tool)} tool returned: “{_quote(content)}”")
            continue
        if isinstance(data, dict) and data.get("error") and len(data) <= 2:
            blocks.append(_failure_block(tool, f"Error: {data['error']}"))
            continue
        rendered: str | None = None
        if isinstance(data, dict):
            if tool in _INLINE_RENDERERS:
                rendered = _INLINE_RENDERERS[tool](data, item.arguments)
                if rendered:
                    phrases.append(rendered)
                    continue
            elif tool in _BLOCK_RENDERERS:
                rendered = _BLOCK_RENDERERS[tool](data, item.arguments)
        blocks.append(rendered or f"The {_inline_code(tool)} tool returned {_inline_code(summarize_json(data))}.")
    parts = ([_join_phrases(phrases)] if phrases else []) + blocks
    if missing:
        parts.append(missing_toolsets_note(missing))
    if not parts:
        return "The tools finished without returning anything I could use."
    return "\n\n".join(parts)


# --- canned replies ------------------------------------------------------------


def _needed_toolsets(intents: Sequence[Intent]) -> dict[str, list[str]]:
    """Toolset id -> what it would have been used for, in the order asked."""
    needed: dict[str, list[str]] = {}
    for intent in intents:
        purposes = needed.setdefault(intent.toolset, [])
        purpose = TOOL_PURPOSES.get(intent.tool, intent.tool)
        if purpose not in purposes:
            purposes.append(purpose)
    return needed


def _toolset_label(toolset: str) -> str:
    return f"**{TOOLSET_LABELS.get(toolset, toolset)}** ({_inline_code(toolset)})"


def missing_toolsets_note(intents: Sequence[Intent]) -> str:
    needed = _needed_toolsets(intents)
    wanted = "; ".join(f"{_toolset_label(toolset)} for {', '.join(purposes)}" for toolset, purposes in needed.items())
    return f"I skipped part of your question. To answer all of it, enable {wanted}."


def enable_toolsets_answer(intents: Sequence[Intent]) -> str:
    needed = _needed_toolsets(intents)
    if len(needed) == 1:
        intro = "I'd answer that with a tool, but its toolset isn't enabled in this chat."
    else:
        intro = "I'd answer that with tools, but their toolsets aren't enabled in this chat."
    lines = [f"- {_toolset_label(toolset)}: {', '.join(purposes)}" for toolset, purposes in needed.items()]
    return "\n".join(
        [
            f"{intro} Enable {'it' if len(needed) == 1 else 'them'} and ask again:",
            "",
            *lines,
            "",
            "_This is Tessera's offline demo model: it answers only through tools._",
        ]
    )


def help_answer(user_text: str) -> str:
    quote = _quote(user_text) or "(an empty message)"
    return "\n".join(
        [
            (
                "I'm **Tessera's offline demo model**. I run without a network or an "
                "API key, so I only understand a few kinds of requests:"
            ),
            "",
            '- **Time**: "What time is it in Tokyo?" (`clock_math` toolset)',
            '- **Arithmetic**: "What is 12*7?", "15 plus 27" (`clock_math` toolset)',
            '- **News and search**: "Latest news about AI", "Search for …" (`exa` toolset)',
            '- **Web pages**: "Summarize https://…" (`web` toolset)',
            "",
            "You wrote:",
            "",
            _blockquote(quote),
            "",
            "Pick a real model for this chat to get open-ended answers.",
        ]
    )


def out_of_tools_answer() -> str:
    return (
        "I've reached the limit of tool calls for this turn before getting any results, "
        "so I can't answer that reliably. Try asking again, or ask for fewer things at once."
    )


FAIL_MID_TEXT = "Let me work through this step by step. First, I'll look at what you asked and then"

SLOW_TEXT = """\
## A longer answer, streamed slowly

This reply exists so you can watch a long answer arrive piece by piece. It is written by \
Tessera's offline demo model, which never touches the network: every word below was decided \
in advance, and the only thing that varies is how fast it reaches your screen.

While it streams, try the things a real conversation has to survive:

- Press **Stop** part-way through and check that the partial text is kept.
- Reload the page and check that the turn picks up where it was, or shows as stopped.
- Open the same chat in a second tab and compare what both tabs show.
- Send another message straight after stopping, to see that the chat is ready again.

The stream is paced at a fixed rate of tokens per second, so a long answer like this one takes \
several seconds. That is slow enough to press a button in the middle and fast enough not to be \
tedious. The rate can be changed for a single call, or for the whole process through an \
environment variable, and a rate of zero turns the delay off for tests.

Here is a small code block, because answers often contain one and the renderer should cope \
with a fence that is still open while text arrives:

```python
def tokens(text: str) -> list[str]:
    # Split on whitespace but keep it attached, like a model's tokens.
    return re.findall(r"\\S+\\s*", text)
```

Markdown has to render correctly both while it streams and once it is complete. Half a table, \
half a list item or an unfinished code fence are normal states during streaming, and none of \
them should break the page or hide text that already arrived.

That is the end of this long answer. If you stopped it early, the last sentence you can read \
is wherever the stream was when you pressed the button.
"""
