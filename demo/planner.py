"""Decide what the demo model replies, from the OpenAI-format conversation alone.

Kept free of any streaming or LiteLLM concerns so the decision is easy to test and
the sync, async, streaming and non-streaming paths cannot disagree.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from . import answers, delegating
from . import artifacts as demo_artifacts
from . import catalogue as demo_catalogue
from . import code as demo_code
from . import files as demo_files
from . import knowledge as demo_knowledge
from . import memory as demo_memory
from .intents import detect_intents
from .reading import Intent, offered_name
from .workspace_intents import asks_for_own_tasks

FAIL_BEFORE_TRIGGER = "[demo:fail-before]"
FAIL_MID_TRIGGER = "[demo:fail-mid]"
SLOW_TRIGGER = "[demo:slow]"
# Guidance for a running answer (a steer, or any message) starting with this is followed
# visibly, so a test can see the model read it.
GUIDANCE_PREFIX = "guidance:"

ToolKey = tuple[str, str]  # (toolset id, tool suffix)


@dataclass(frozen=True)
class PlannedCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as it will be streamed


@dataclass(frozen=True)
class Plan:
    text: str = ""
    tool_calls: tuple[PlannedCall, ...] = ()
    # Simulated provider failure: before anything is sent, or after `text` has partly streamed.
    fail: Literal["before", "mid"] | None = None


def value_of(obj: Any, key: str, default: Any = None) -> Any:
    """Read a key from a dict or an attribute from a pydantic message; callers send both."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        # Multimodal content: only the text parts mean anything to this model.
        return "\n".join(str(value_of(part, "text", "")) for part in content if value_of(part, "type") == "text")
    return str(content)


def offered_tools(tools: Sequence[Any] | None) -> dict[ToolKey, str]:
    """Map (toolset id, tool suffix) to the full tool name for every tool on offer."""
    offered: dict[ToolKey, str] = {}
    for tool in tools or ():
        name = value_of(value_of(tool, "function", {}), "name")
        if not isinstance(name, str) or "__" not in name:
            continue
        prefix, suffix = name.rsplit("__", 1)
        toolset = prefix.removeprefix("toolset__")
        offered[(toolset, suffix)] = name
    return offered


def _last_index(messages: Sequence[Any], role: str) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if value_of(messages[index], "role") == role:
            return index
    return None


def _parse_arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def collect_results(messages: Sequence[Any], since: int) -> list[answers.ToolResult]:
    """Tool results after the message at `since`, each paired with its call's name and arguments."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    results: list[answers.ToolResult] = []
    for message in messages[since + 1 :]:
        role = value_of(message, "role")
        if role == "assistant":
            for call in value_of(message, "tool_calls") or ():
                function = value_of(call, "function", {})
                calls[str(value_of(call, "id"))] = (
                    str(value_of(function, "name") or "tool"),
                    _parse_arguments(value_of(function, "arguments")),
                )
        elif role == "tool":
            name, arguments = calls.get(
                str(value_of(message, "tool_call_id")),
                (str(value_of(message, "name") or "tool"), {}),
            )
            results.append(answers.ToolResult(name, arguments, content_text(value_of(message, "content"))))
    return results


def _call_id(index: int, name: str, arguments: str, messages: Sequence[Any]) -> str:
    # Hashing the conversation length keeps ids unique when the same question is asked
    # twice in one chat, while staying identical for identical input.
    digest = hashlib.sha256(f"{len(messages)}|{index}|{name}|{arguments}".encode()).hexdigest()[:10]
    return f"call_demo_{index}_{digest}"


# The line chat/worker/prompts.py adds to the system prompt when it knows the user's name.
_USER_NAME_RE = re.compile(r"^The user's name is (?P<name>.+)\.$", re.MULTILINE)


def user_name(messages: Sequence[Any]) -> str:
    for message in messages:
        if value_of(message, "role") == "system":
            found = _USER_NAME_RE.search(content_text(value_of(message, "content")))
            if found:
                return found.group("name").strip()
    return ""


def _for_user(intents: list[Intent], user_text: str, name: str) -> list[Intent]:
    """A user's own tasks ("my tasks") are the ones assigned to their name, as a model told it would ask."""
    if not name or not asks_for_own_tasks(user_text):
        return intents
    return [
        replace(i, arguments={**i.arguments, "assignee": name})
        if i.tool == "list_tasks" and not i.arguments.get("assignee")
        else i
        for i in intents
    ]


def _tool_history(messages: Sequence[Any]) -> str:
    return "\n".join(content_text(value_of(m, "content")) for m in messages if value_of(m, "role") == "tool")


def _calls(names_and_arguments: Sequence[tuple[str, Any]], messages: Sequence[Any]) -> Plan:
    calls = []
    for index, (name, arguments_dict) in enumerate(names_and_arguments):
        arguments = json.dumps(arguments_dict, ensure_ascii=False)
        calls.append(PlannedCall(_call_id(index, name, arguments, messages), name, arguments))
    return Plan(tool_calls=tuple(calls))


def _plan_request(messages: Sequence[Any], tools: Sequence[Any] | None, tool_choice: Any, *, may_look_up: bool) -> Plan:
    """The first step of an answer: hand work to agents, call tools, look catalogued tools up
    first (`may_look_up`: not again once looked up), or say which toolsets it would need."""
    offered = {} if tool_choice == "none" else offered_tools(tools)
    user_index = _last_index(messages, "user")
    full_text = content_text(value_of(messages[user_index], "content")) if user_index is not None else ""
    # A file's name or size in the note about attached files is not a request.
    user_text = demo_files.own_words(full_text)
    offered_names = set(offered.values()) | {
        str(value_of(value_of(t, "function", {}), "name")) for t in tools or () if tool_choice != "none"
    }
    handed = delegating.delegations(user_text, offered_names)
    if handed:
        return _calls([(name, arguments) for _, name, arguments in handed], messages)
    intents = (
        demo_code.intents(full_text)
        or demo_files.intents(full_text)
        or demo_knowledge.intents(user_text)
        or demo_artifacts.intents(user_text, _tool_history(messages))
        or demo_memory.intents(user_text)
        or detect_intents(user_text)
        or delegating.research_intents(user_text)
    )
    seen = demo_files.describe_images(value_of(messages[user_index], "content")) if user_index is not None else ""
    if seen and not intents:
        return Plan(text=seen)
    intents = _for_user(intents, user_text, user_name(messages))
    usable = [i for i in intents if offered_name(offered, i)]
    if usable:
        return _calls([(offered_name(offered, i) or "", i.arguments) for i in usable], messages)
    # Past the tool budget the tools it needs are in the catalogue, not on offer: a real model
    # looks them up with find_tools and calls them from its next step.
    wanted = demo_catalogue.lookup(messages, offered_names, user_text, intents) if may_look_up else []
    if wanted:
        return _calls([(demo_catalogue.FIND_TOOL, {"names": wanted})], messages)
    if intents:
        return Plan(text=answers.enable_toolsets_answer(intents))
    return Plan(text=answers.help_answer(user_text))


def plan_reply(messages: Sequence[Any], tools: Sequence[Any] | None, tool_choice: Any = None) -> Plan:
    offered = {} if tool_choice == "none" else offered_tools(tools)
    last = messages[-1] if messages else None
    last_role = value_of(last, "role") if last is not None else None
    user_index = _last_index(messages, "user")
    full_text = content_text(value_of(messages[user_index], "content")) if user_index is not None else ""
    user_text = demo_files.own_words(full_text)

    if last_role == "user":
        if user_text.strip().lower().startswith(GUIDANCE_PREFIX):
            return Plan(text=f"Following your guidance: {user_text.strip()[len(GUIDANCE_PREFIX) :].strip()}")
        if FAIL_BEFORE_TRIGGER in user_text:
            return Plan(fail="before")
        if FAIL_MID_TRIGGER in user_text:
            return Plan(text=answers.FAIL_MID_TEXT, fail="mid")
        if SLOW_TRIGGER in user_text:
            return Plan(text=answers.SLOW_TEXT)
        return _plan_request(messages, tools, tool_choice, may_look_up=True)

    # After tool results, or told to stop using tools: answer from what was gathered this turn.
    gathered = collect_results(messages, user_index if user_index is not None else -1)
    if gathered and last_role == "tool" and all(r.name == demo_catalogue.FIND_TOOL for r in gathered):
        # What it looked up is on offer now: the request's first step, once.
        return _plan_request(messages, tools, tool_choice, may_look_up=False)
    results = [r for r in gathered if r.name != demo_catalogue.FIND_TOOL]
    if results and all(r.name.startswith(delegating.DELEGATE) for r in results):
        return Plan(text=delegating.delegation_answer(results))
    if results and delegating.is_week_plan(user_text):
        return Plan(text=answers.week_plan_intro() + "\n\n" + answers.results_answer(results, []))
    if results:
        missing: list[Intent] = []
        if offered:
            missing = [i for i in detect_intents(user_text) if not offered_name(offered, i)]
        return Plan(text=answers.results_answer(results, missing))
    if last_role == "system":
        return Plan(text=answers.out_of_tools_answer())
    return Plan(text=answers.help_answer(user_text))
