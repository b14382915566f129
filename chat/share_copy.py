"""What "Continue as my own chat" copies from a share (chat/shares.py): the exchanges as the
share page shows them, nothing more. A tool card on that page shows a result cut at the card's
limit, the content blocks meant for a person, and for the loop's own tools (find_tools,
read_tool_result) one line; the model's copy of each result (the tool messages, which the page
never shows) is rebuilt from that same shown part. So the copy's new owner, and the model they
continue with, can read back only what the share page already showed them.
"""

from __future__ import annotations

import json
from typing import Any

from toolsets.mcp.results import for_user, is_content_result, model_text
from toolsets.models import ToolExecution

from .presenters.cards import RESULT_DISPLAY_LIMIT, pretty_json
from .presenters.turns import BUILT_IN_TOOLS
from .tool_content import TEXT_LIMIT

CUT = "[… the rest of this result was not shared]"
NOT_SHARED = "(This result was not shared.)"


def shown_result(execution: ToolExecution) -> Any:
    """The part of an execution's result that its card shows on the share page."""
    result = execution.result
    if isinstance(result, dict) and isinstance(result.get("delegation"), dict):
        # A delegation card shows its task, its agent's steps (their own records) and its answer.
        return {"delegation": result["delegation"]}
    if execution.status != ToolExecution.Status.SUCCESS or result is None:
        return None  # a card that did not succeed shows its error, never a result
    if is_content_result(result):
        return _shown_content(result)
    text = pretty_json(result)
    # Shown whole: kept as it is (components and summaries read its structure).
    return result if len(text) <= RESULT_DISPLAY_LIMIT else text[:RESULT_DISPLAY_LIMIT] + "\n" + CUT


def _shown_content(result: dict[str, Any]) -> dict[str, Any]:
    # Blocks meant for the model only are not on the card; long texts are cut where it cuts them.
    blocks = []
    for block in result["content"]:
        if not for_user(block):
            continue
        text = block.get("text")
        if isinstance(text, str) and len(text) > TEXT_LIMIT:
            block = {**block, "text": text[:TEXT_LIMIT] + "\n" + CUT}
        blocks.append(block)
    shown: dict[str, Any] = {"content": blocks}
    if "structuredContent" in result:
        structured = json.dumps(result["structuredContent"], indent=2, ensure_ascii=False, default=str)
        if len(structured) <= TEXT_LIMIT:
            shown["structuredContent"] = result["structuredContent"]
        else:  # shown as the beginning of its JSON: kept as that text
            shown["content"].append({"type": "text", "text": structured[:TEXT_LIMIT] + "\n" + CUT})
    return shown


def model_copy(execution: ToolExecution | None, name: str, stored: str) -> str:
    """The copy's tool message for a call: the model reads what the card showed."""
    if execution is None:
        if name in BUILT_IN_TOOLS:
            # The loop's own tools: the card shows the first line of what they answered (a
            # read_tool_result's answer is a piece of an earlier result, which was not shown).
            return stored.split("\n", 1)[0]
        return NOT_SHARED
    if execution.status != ToolExecution.Status.SUCCESS:
        return f"Error: {execution.error}" if execution.error else NOT_SHARED
    shown = shown_result(execution)
    if isinstance(shown, dict) and isinstance(shown.get("delegation"), dict):
        answer = shown["delegation"].get("result")
        return answer if isinstance(answer, str) and answer else NOT_SHARED
    if shown is None:
        return NOT_SHARED
    return model_text(shown)


def call_names(messages: list[Any]) -> dict[tuple[str, int | None, str], str]:
    """(lane, step, call id) → the tool's name, from the assistant messages' calls."""
    names: dict[tuple[str, int | None, str], str] = {}
    for message in messages:
        for call in message.tool_calls or []:
            if isinstance(call, dict):
                function = call.get("function") or {}
                names[(message.lane, message.step, str(call.get("id", "")))] = str(function.get("name", ""))
    return names
