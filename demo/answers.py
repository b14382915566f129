"""Markdown the demo model writes: final answers from tool results and canned replies."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import artifacts as demo_artifacts
from . import code as demo_code
from . import files as demo_files
from . import knowledge as demo_knowledge
from . import memory as demo_memory
from .formatting import (
    _blockquote,
    _format_number,
    _inline_code,
    _is_web_url,
    _join_phrases,
    _link_text,
    _quote,
    first_sentences,
    place_name,
    pretty_expression,
    summarize_json,
    tool_suffix,
)
from .reading import CLOCK_MATH, EXA, WEB, WORKSPACE, Intent
from .workspace_answers import WORKSPACE_RENDERERS

TOOLSET_LABELS: dict[str, str] = {
    CLOCK_MATH: "Clock & Math",
    EXA: "Exa search",
    WEB: "Web",
    WORKSPACE: "Workspace",
    demo_knowledge.KNOWLEDGE: "Knowledge",
    demo_memory.MEMORY: "Memory",
    "code": "Code",
    demo_artifacts.ARTIFACTS: "Artifacts",
}

TOOL_PURPOSES: dict[str, str] = {
    "current_time": "telling the time",
    "calculate": "arithmetic",
    "search": "web search and news",
    "search_knowledge": "searching knowledge bases",
    "fetch_page": "reading web pages",
    "list_projects": "projects",
    "list_tasks": "tasks",
    "get_task": "tasks",
    "create_task": "creating tasks",
    "update_task": "updating tasks",
    "list_events": "your calendar",
    "list_emails": "email",
    "list_meetings": "meeting summaries",
    "get_meeting": "meeting summaries",
    "draft_social_post": "drafting posts",
    "run_python": "running Python",
    "create_artifact": "documents beside the chat",
    "update_artifact": "documents beside the chat",
}

# The Workspace toolset is only offered once it has data to work on.
WORKSPACE_SETUP_NOTE = (
    "The **Workspace** toolset also needs its sample data: open **Toolsets** settings and click "
    "**Create sample data** on the Workspace card."
)

# "Error: …" from a tool itself, "Error (validation_error): …" from Tessera's executor.
_ERROR_RE = re.compile(r"Error(?:\s*\([^)\n]*\))?:")

_UTC_NAMES = {"UTC", "Etc/UTC", "GMT", "Etc/GMT", "Z"}


@dataclass(frozen=True)
class ToolResult:
    """A tool message paired with the call that produced it."""

    name: str
    arguments: dict[str, Any]
    content: str


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
    numbers = {s.get("url"): s.get("n") for s in _sources(result)}
    for item in items[:5]:
        if not isinstance(item, dict):
            continue
        url = item.get("url")
        title = _link_text(str(item.get("title") or url or "Untitled"))
        line = f"- [{title}]({url})" if _is_web_url(url) else f"- {title}"
        published = item.get("published_date") or item.get("publishedDate")
        if published:
            line += f" ({str(published)[:10]})"
        if numbers.get(url):
            line += f" [{numbers[url]}]"
        lines.append(line)
    return "\n".join(lines)


def _sources(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The numbered sources a tool result carries (see the executor): what the demo cites."""
    found = data.get("sources")
    return [s for s in found if isinstance(s, dict) and isinstance(s.get("n"), int)] if isinstance(found, list) else []


def cite_marks(data: dict[str, Any], limit: int = 5) -> str:
    return "".join(f" [{s['n']}]" for s in _sources(data)[:limit])


def with_citations(block: str, data: dict[str, Any]) -> str:
    """The block with its result's source numbers after its first sentence or paragraph."""
    marks = cite_marks(data)
    if not marks or "[" + str(_sources(data)[0]["n"]) + "]" in block:
        return block
    head, sep, rest = block.partition("\n\n")
    if head.startswith(":::component"):
        return marks.strip() + "\n\n" + block
    return head.rstrip() + marks + sep + rest


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
_BLOCK_RENDERERS = {
    "search": _search_block,
    "fetch_page": _page_block,
    **WORKSPACE_RENDERERS,
    **demo_files.RENDERERS,
    **demo_knowledge.RENDERERS,
    **demo_memory.RENDERERS,
}


def _failure_block(tool: str, error: str) -> str:
    return f"The {_inline_code(tool)} tool failed:\n\n{_blockquote(_quote(error, 300))}"


def results_answer(results: Iterable[ToolResult], missing: Sequence[Intent] = ()) -> str:
    """The final answer after tool calls: one sentence of short facts, then longer blocks."""
    phrases: list[str] = []
    blocks: list[str] = []
    for item in results:
        tool = tool_suffix(item.name)
        content = item.content.strip()
        if tool == "run_python" and not _ERROR_RE.match(content):
            blocks.append(demo_code.answer(content))
            continue
        if tool in ("create_artifact", "update_artifact") and not _ERROR_RE.match(content):
            blocks.append(demo_artifacts.answer(content))
            continue
        if _ERROR_RE.match(content):
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
                if rendered:
                    rendered = with_citations(rendered, data)
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
    note = f"I skipped part of your question. To answer all of it, enable {wanted}."
    return f"{note} {WORKSPACE_SETUP_NOTE}" if WORKSPACE in needed else note


def enable_toolsets_answer(intents: Sequence[Intent]) -> str:
    needed = _needed_toolsets(intents)
    if len(needed) == 1:
        intro = "I'd answer that with a tool, but its toolset isn't enabled in this chat."
    else:
        intro = "I'd answer that with tools, but their toolsets aren't enabled in this chat."
    lines = [f"- {_toolset_label(toolset)}: {', '.join(purposes)}" for toolset, purposes in needed.items()]
    setup = ["", WORKSPACE_SETUP_NOTE] if WORKSPACE in needed else []
    return "\n".join(
        [
            f"{intro} Enable {'it' if len(needed) == 1 else 'them'} and ask again:",
            "",
            *lines,
            *setup,
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
            (
                '- **Workspace**: "Summarize stale tasks across projects", "What\'s on my calendar this week?", '
                '"Any unread emails?", "Summarize yesterday\'s meeting", "Draft a LinkedIn post about our launch", '
                '"Show task 3", "Create a task \'Book a venue\' in Q3 marketing" (`workspace` toolset, '
                "after **Create sample data** in Toolsets settings)"
            ),
            (
                '- **Code**: "Run this:" followed by a fenced Python block (`` ```python ``), '
                'or "Plot this CSV" with a CSV attached (`code` toolset)'
            ),
            (
                '- **Artifacts**: "Make an HTML page about our launch", "Draw a diagram of the sign-up flow", '
                '"Create an SVG logo" (`artifacts` toolset)'
            ),
            '- **Knowledge**: "Search the handbook for holidays", with a knowledge base attached (`knowledge` toolset)',
            (
                '- **Memory**: "Remember that I prefer answers in German", "What do you remember about me?" '
                "(`memory` toolset)"
            ),
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


def week_plan_intro() -> str:
    """The Workspace assistant's plan: what it looked at, then the week laid out."""
    return (
        "Here is a plan for your week: start each day with the most pressing open task, keep the "
        "meetings below in view, and leave the afternoons for focused work."
    )
