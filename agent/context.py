"""Fitting each request to the model's context window.

The loop keeps the whole conversation (`Agent.messages`, and the database keeps it too); only
the copy sent to the provider is fitted, in this order, stopping as soon as it fits:

1. old tool results (before the last `keep_steps` tool-using steps, or the last one when that
   is not enough) become a one-line summary
   plus a handle, oldest first; the model reads one again with the built-in `read_tool_result`
   tool, page by page;
2. older exchanges become a running summary written by the host's `Summarizer`. A summary covers
   the conversation up to the start of an exchange and is stored under a hash of what it covers,
   so every later call (and turn) finds it again instead of writing a new one; a new summary is
   made only when the part after the stored one no longer fits, and it continues the stored one;
3. files and images already read are referred to, not re-sent (see `refer_to_files`);

and, last, the longest remaining texts are cut, so a request never goes out over the budget.

Plain Python: the host supplies the budget, a token counter and the summarizer.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .types import Usage

READ_TOOL = "read_tool_result"
READ_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": READ_TOOL,
        "description": "Read again a tool result that was shortened to fit the context, by its handle, page by page.",
        "parameters": {
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": "The handle given in the shortened result."},
                "offset": {"type": "integer", "description": "First character to return (default 0)."},
                "limit": {"type": "integer", "description": "Characters to return (default 4000, at most 8000)."},
            },
            "required": ["handle"],
        },
    },
}
PAGE_CHARS = 4000
MAX_PAGE_CHARS = 8000
SUMMARY_HEADING = "Summary of the earlier conversation (older messages are not repeated here):"
CUT_MARK = "\n[… cut to fit the model's context]"
# How long the part of a stub that quotes the result may be.
STUB_PREVIEW = 120


@dataclass(frozen=True)
class Budget:
    """`limit`: input tokens the model takes (None: unknown, nothing is fitted until the
    provider says the request was too long); `reserve`: tokens kept free for the answer."""

    limit: int | None
    reserve: int = 0

    @property
    def input(self) -> int | None:
        if self.limit is None:
            return None
        return max(1, self.limit - self.reserve)


class Summarizer(Protocol):
    """Writes and stores running summaries (the host: a model call and a database row)."""

    async def lookup(self, keys: list[str]) -> dict[str, str]:
        """The stored summaries among `keys` (key → text)."""
        ...

    async def make(self, key: str, previous: str, span: list[dict[str, Any]]) -> tuple[str, Usage]:
        """Writes the summary of `previous` (the summary so far) followed by `span`, stores it
        under `key`, and returns it with what writing it cost."""
        ...


MessageCounter = Callable[[dict[str, Any]], int]
ToolsCounter = Callable[[list[dict[str, Any]]], int]


@dataclass
class Fitted:
    """The request to send, and what fitting did to it (for the reader's notices)."""

    messages: list[dict[str, Any]]
    tokens: int = 0  # the request's count (0: not counted, the budget being unknown)
    compacted: int = 0  # tool results replaced by their one-line summary
    summary: str = ""  # the running summary the request starts with, if any
    summary_made: bool = False  # written for this request (else found stored)
    referred: int = 0  # files and images referred to instead of re-sent
    cut: int = 0  # texts cut as a last resort
    usage: Usage = field(default_factory=Usage)


def stub(name: str, handle: str, content: str) -> str:
    """The one line an old tool result becomes."""
    first = " ".join(content.split())
    preview = first[:STUB_PREVIEW] + ("…" if len(first) > STUB_PREVIEW else "")
    return (
        f"[Earlier result of {name}, {len(content)} characters, shortened to fit the context: {preview!s} "
        f'Read it again with {READ_TOOL}(handle="{handle}").]'
    )


class Fitter:
    def __init__(
        self,
        budget: Budget,
        count: MessageCounter,
        count_tools: ToolsCounter,
        summarizer: Summarizer | None = None,
        keep_steps: int = 2,
    ) -> None:
        self.budget = budget
        self._count = count
        self._count_tools = count_tools
        self.summarizer = summarizer
        self.keep_steps = keep_steps
        # Counting is the costly part of fitting, and every call sees the same messages again:
        # each message object is counted once (the transcript's are never changed in place; the
        # object is kept with its count, so a reused id cannot be mistaken for it).
        self._counted: dict[int, tuple[dict[str, Any], int]] = {}
        self._stubs: dict[int, tuple[dict[str, Any], dict[str, Any] | None]] = {}

    def count(self, message: dict[str, Any]) -> int:
        known = self._counted.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        value = self._count(message)
        self._counted[id(message)] = (message, value)
        return value

    def count_tools(self, tools: list[dict[str, Any]]) -> int:
        return self._count_tools(tools) if tools else 0

    def total(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
        return sum(self.count(m) for m in messages) + (self._count_tools(tools) if tools else 0)

    async def fit(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, limit: int | None = None
    ) -> Fitted:
        """`messages` fitted to `limit` tokens (default: the budget's input). `messages` itself
        is never changed."""
        budget = limit if limit is not None else self.budget.input
        if budget is None:
            # A model of unknown size: nothing to fit, so nothing is counted (each new message
            # would go through the tokenizer on every call for a total no one reads).
            return Fitted(list(messages))
        total = self.total(messages, tools)
        if total <= budget:
            return Fitted(list(messages), tokens=total)
        room = budget - (self._count_tools(tools) if tools else 0)

        # The results of the last few steps stay whole if the rest can give way; else only the
        # last step's do (a summary is costlier than a stub).
        for keep in sorted({self.keep_steps, 1}, reverse=True):
            compacted, count = self._compact_tool_results(messages, room, keep)
            if self._tokens(compacted) <= room:
                break
        fitted = Fitted(compacted, compacted=count)
        if self._tokens(compacted) > room and self.summarizer is not None:
            await self._summarize(messages, fitted, room)
        if self._tokens(fitted.messages) > room:
            fitted.messages, fitted.referred = refer_to_files(fitted.messages)
        if self._tokens(fitted.messages) > room:
            fitted.messages, fitted.cut = self._cut(fitted.messages, room)
        fitted.tokens = self.total(fitted.messages, tools)
        return fitted

    def _tokens(self, messages: list[dict[str, Any]]) -> int:
        return sum(self.count(m) for m in messages)

    def _compact_tool_results(
        self, messages: list[dict[str, Any]], room: int, keep_steps: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Step 1: tool results before the recent steps become stubs, oldest first, until the
        request fits (every old one, if it does not)."""
        names: dict[str, str] = {}
        stepped = []
        for index, message in enumerate(messages):
            if message.get("role") == "assistant" and message.get("tool_calls"):
                stepped.append(index)
                for call in message["tool_calls"]:
                    names[str(call.get("id"))] = str(call.get("function", {}).get("name", "tool"))
        recent = stepped[-keep_steps] if len(stepped) >= keep_steps and keep_steps else len(messages)
        result = list(messages)
        total = self._tokens(result)
        count = 0
        for index in range(recent):
            if total <= room:
                break
            message = result[index]
            content = message.get("content")
            if message.get("role") != "tool" or not isinstance(content, str):
                continue
            replaced = self._stub_of(message, names)
            if replaced is None:
                continue
            total += self.count(replaced) - self.count(message)
            result[index] = replaced
            count += 1
        return result, count

    def _stub_of(self, message: dict[str, Any], names: dict[str, str]) -> dict[str, Any] | None:
        """The stub message of a tool result, made once per result (each call of a turn would
        make the same one again, and count it again)."""
        known = self._stubs.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        handle = str(message.get("tool_call_id", ""))
        content = str(message.get("content"))
        short = stub(names.get(handle, "a tool"), handle, content)
        replaced = {**message, "content": short} if len(short) < len(content) else None
        self._stubs[id(message)] = (message, replaced)
        return replaced

    async def _summarize(self, original: list[dict[str, Any]], fitted: Fitted, room: int) -> None:
        """Step 2: the request becomes the leading system messages with the running summary,
        then the exchanges after it."""
        assert self.summarizer is not None
        current = fitted.messages  # same length and order as `original`: only contents differ
        head = 0
        while head < len(current) and current[head].get("role") == "system":
            head += 1
        starts = [i for i in range(head + 1, len(current)) if current[i].get("role") == "user"]
        if not starts:
            return
        keys = _span_keys(original, head, starts)
        stored = await self.summarizer.lookup(list(keys.values()))
        covered, text = head, ""
        for start in reversed(starts):
            if keys[start] in stored:
                covered, text = start, stored[keys[start]]
                break
        request = self._with_summary(current, head, covered, text)
        if self._tokens(request) > room:
            # A new span: up to the first exchange after which the rest takes at most half the
            # room the system prompt leaves, so the summary is reused for many calls while the
            # chat grows again.
            allowance = max(0, room - self._tokens(current[:head])) // 2
            later = [s for s in starts if s > covered]
            if later:
                target = later[-1]
                for start in later:
                    if self._tokens(current[start:]) <= allowance:
                        target = start
                        break
                text, usage = await self.summarizer.make(keys[target], text, current[covered:target])
                fitted.usage.add(usage)
                fitted.summary_made = True
                covered = target
                request = self._with_summary(current, head, covered, text)
        if covered > head:
            fitted.messages = request
            fitted.summary = text

    def _with_summary(self, messages: list[dict[str, Any]], head: int, covered: int, text: str) -> list[dict[str, Any]]:
        if covered <= head or not text:
            return list(messages)
        summary = f"{SUMMARY_HEADING}\n{text}"
        if head:
            # Joined to the system prompt: one system message first (some providers take no
            # other), and a prefix that stays the same for every call the summary serves.
            system = messages[head - 1]
            joined = {**system, "content": f"{_text(system.get('content'))}\n\n{summary}"}
            return [*messages[: head - 1], joined, *messages[covered:]]
        return [{"role": "system", "content": summary}, *messages[covered:]]

    def _cut(self, messages: list[dict[str, Any]], room: int) -> tuple[list[dict[str, Any]], int]:
        """Last resort: the longest texts after the system prompt are cut until it fits."""
        result = list(messages)
        cut = 0
        order = sorted(
            (i for i, m in enumerate(result) if m.get("role") != "system" and isinstance(m.get("content"), str)),
            key=lambda i: -len(result[i]["content"]),
        )
        for index in order:
            over = self._tokens(result) - room
            if over <= 0:
                break
            content = result[index]["content"]
            # About four characters a token; a little more is cut than needed, never everything.
            keep = max(200, len(content) - over * 4 - len(CUT_MARK) - 200)
            if keep >= len(content):
                continue
            result[index] = {**result[index], "content": content[:keep] + CUT_MARK}
            cut += 1
        return result, cut


def refer_to_files(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Step 3: images (and file parts) of every message but the last user message are replaced
    by a line naming them: the model has read them already and can open them again with the
    files tools."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    result = list(messages)
    referred = 0
    for index, message in enumerate(messages):
        content = message.get("content")
        if index == last_user or not isinstance(content, list):
            continue
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in ("image_url", "file", "input_audio"):
                referred += 1
                parts.append({"type": "text", "text": f"[{_part_name(part)} shown earlier; not sent again]"})
            else:
                parts.append(part)
        if parts != content:
            result[index] = {**message, "content": parts}
    return result, referred


def _part_name(part: dict[str, Any]) -> str:
    if part.get("type") == "image_url":
        return "An image"
    if part.get("type") == "file":
        name = (part.get("file") or {}).get("filename")
        return f"The file {name}" if name else "A file"
    return "An attachment"


def _span_keys(messages: list[dict[str, Any]], head: int, starts: list[int]) -> dict[int, str]:
    """For each exchange start, a hash of the conversation before it (after the system
    prompt): a stored summary of exactly that part is found again by it, in any later call,
    and a branch or an edit that changes it gets a summary of its own."""
    hasher = hashlib.sha256()
    keys: dict[int, str] = {}
    index = head
    for start in starts:
        while index < start:
            hasher.update(json.dumps(messages[index], sort_keys=True, default=str).encode())
            hasher.update(b"\n")
            index += 1
        keys[start] = hasher.copy().hexdigest()
    return keys


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def read_back(messages: list[dict[str, Any]], arguments: dict[str, Any]) -> tuple[str, bool]:
    """The built-in read-back tool: a page of a stored tool result, found by its handle (the
    call's id) in the whole conversation. Returns (text, is_error)."""
    handle = arguments.get("handle")
    offset = arguments.get("offset", 0)
    limit = arguments.get("limit", PAGE_CHARS)
    if not isinstance(handle, str) or not handle:
        return "Error: handle: a non-empty string is required", True
    if not isinstance(offset, int) or offset < 0 or not isinstance(limit, int) or limit < 1:
        return "Error: offset and limit must be whole numbers (offset ≥ 0, limit ≥ 1)", True
    limit = min(limit, MAX_PAGE_CHARS)
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") == handle:
            content = _text(message.get("content"))
            page = content[offset : offset + limit]
            end = offset + len(page)
            more = f"\n[More: call {READ_TOOL} again with offset={end}.]" if end < len(content) else ""
            return f"Result {handle}, characters {offset}–{end} of {len(content)}:\n{page}{more}", False
    return f"Error: no stored result has the handle {handle!r}", True


# How providers state their limit in a context-length error, e.g. OpenAI's "maximum context
# length is 8192 tokens. However, your messages resulted in 9000 tokens", Anthropic's "prompt is
# too long: 215000 tokens > 200000 maximum".
_LIMIT_PATTERNS = (
    re.compile(r"maximum context length is (?P<limit>\d+) tokens.*?resulted in (?P<used>\d+) tokens", re.S),
    re.compile(r"(?P<used>\d+) tokens > (?P<limit>\d+) maximum"),
    re.compile(r"maximum context length is (?P<limit>\d+) tokens"),
)


def retry_limit(error: str, refused: int, reserve: int) -> int:
    """The budget for the one retry after a context-length error: the provider's own limit when
    its message states it (less the answer's reserve, scaled by how its count of the refused
    request compares with ours, with a margin), else three quarters of what was refused."""
    share = int(refused * 0.75)
    for pattern in _LIMIT_PATTERNS:
        match = pattern.search(error)
        if match is None:
            continue
        limit = int(match["limit"])
        used = int(match["used"]) if "used" in match.groupdict() and match["used"] else 0
        scale = refused / used if used else 1.0
        room = max(limit - reserve, limit // 2)
        return max(1, int(room * scale * 0.9))
    return max(1, share)
