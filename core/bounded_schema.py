"""JSON Schema checks whose schema comes from someone else (an MCP server's tool input schema or
elicitation form), with every regular expression in it run by a bounded engine.

jsonschema matches `pattern`, `patternProperties` (and through them `additionalProperties`) with
Python's `re`, which backtracks without limit and holds the GIL meanwhile: a pattern such as
`^(a+)+$` against 30 characters stalls the whole process for minutes, whichever thread runs it.
Here those keywords use the `regex` package with a timeout instead, all of one validation
sharing one time budget; a pattern that cannot be checked within it is an error of its own
(`Unchecked`), never a hang. `regex` compiles some patterns in time that grows with the product
of their counted repeats (`((a{100}){100}){100}` takes seconds, uninterruptibly), so a pattern
is only compiled after `pattern_problem` found it small enough.
"""

from __future__ import annotations

import contextvars
import functools
import re
import time
from collections.abc import Iterator
from typing import Any

import jsonschema
import regex
from jsonschema import ValidationError

# How long all the patterns of one validation may take together.
BUDGET_S = 0.25
MAX_PATTERN = 1_000
# How large a pattern may be once its counted repeats are written out (see `_unrolled_size`).
MAX_UNROLLED = 20_000
_COUNT = re.compile(r"\{(\d+)(?:,(\d*))?\}")

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("bounded_schema_deadline", default=None)
# Whether the schema being checked has patternProperties anywhere (a `$ref` may lead there).
_root_has_pattern_properties: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "bounded_schema_pattern_properties", default=None
)


class Unchecked(ValidationError):
    """A value that could not be checked against a server's pattern within the bounds."""


class _Refused(Exception):
    pass


def pattern_problem(pattern: Any) -> str:
    """Why `pattern` will not be run (not text, too long, too costly to compile, invalid), or ""."""
    if not isinstance(pattern, str):
        return "a pattern is not text"
    if len(pattern) > MAX_PATTERN:
        return f"a pattern is longer than {MAX_PATTERN} characters"
    if _unrolled_size(pattern) > MAX_UNROLLED:
        return "a pattern repeats too many times"
    try:
        _compiled(pattern)
    except regex.error:
        return "a pattern is not a valid regular expression"
    return ""


def _unrolled_size(pattern: str) -> int:
    """About how many atoms `pattern` has with each counted repeat ({n}, {n,m}: the larger
    bound) written out, nested ones multiplied: what `regex` compiles in time proportional to."""
    stack = [0]  # the size of each open group so far
    last = 0  # the size of the atom a quantifier would repeat
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            stack[-1] += 1
            last = 1
            continue
        if ch == "[":  # a character class is one atom, whatever it holds
            end = i + 1
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            i = end + 1
            stack[-1] += 1
            last = 1
            continue
        if ch == "(":
            stack.append(0)
        elif ch == ")" and len(stack) > 1:
            last = max(1, stack.pop())
            stack[-1] += last
        elif ch == "{" and (count := _COUNT.match(pattern, i)):
            times = max(1, int(count.group(1)), int(count.group(2) or 0))
            stack[-1] += last * (times - 1)
            last *= times
            i = count.end()
            continue
        else:
            stack[-1] += 1
            last = 1
        i += 1
    return sum(stack)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text` (JSON Schema's unanchored sense), within
    what is left of the validation's budget; raises _Refused if it cannot tell."""
    problem = pattern_problem(pattern)
    if problem:
        raise _Refused(problem)
    deadline = _deadline.get()
    left = BUDGET_S if deadline is None else deadline - time.monotonic()
    if left <= 0:
        raise _Refused("checking the patterns took too long")
    try:
        return _compiled(pattern).search(text, timeout=left) is not None
    except TimeoutError:
        raise _Refused("the pattern took too long to check") from None


def _unchecked(reason: str) -> Unchecked:
    return Unchecked(f"This value could not be checked against the server's pattern: {reason}.")


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        if not search(pattern, instance):
            yield ValidationError(f"{instance!r} does not match {pattern!r}")
    except _Refused as exc:
        yield _unchecked(str(exc))


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = search(pattern, key)
            except _Refused as exc:
                yield _unchecked(str(exc))
                return
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:
        if key in known:
            continue
        try:
            if any(search(pattern, key) for pattern in patterns):
                continue
        except _Refused as exc:
            yield _unchecked(str(exc))
            return
        extras.append(key)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        # jsonschema's own wording, which callers (and the model) already know.
        listed = ", ".join(repr(each) for each in sorted(extras, key=str))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


_BASE = jsonschema.Draft202012Validator
_original_unevaluated = _BASE.VALIDATORS["unevaluatedProperties"]


def _unevaluated_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    # jsonschema's own implementation matches patternProperties with `re` while it looks for
    # what was evaluated: a schema combining the two is not run (catalog refuses it up front).
    root = _root_has_pattern_properties.get()
    if uses_key(validator.schema, "patternProperties") if root is None else root:
        yield _unchecked("unevaluatedProperties together with patternProperties is not supported")
        return
    yield from _original_unevaluated(validator, value, instance, schema)


Validator: Any = jsonschema.validators.extend(
    _BASE,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "unevaluatedProperties": _unevaluated_properties,
    },
)


def errors(
    schema: Any, instance: Any, *, format_checker: Any = None, budget_s: float = BUDGET_S
) -> list[ValidationError]:
    """Every error of `instance` against `schema`, its patterns sharing `budget_s` seconds."""
    token = _deadline.set(time.monotonic() + budget_s)
    root = _root_has_pattern_properties.set(uses_key(schema, "patternProperties"))
    try:
        return list(Validator(schema, format_checker=format_checker).iter_errors(instance))
    finally:
        _root_has_pattern_properties.reset(root)
        _deadline.reset(token)


def uses_key(value: Any, key: str) -> bool:
    """Whether `key` appears as a keyword anywhere in the schema `value`."""
    if isinstance(value, dict):
        return key in value or any(uses_key(item, key) for item in value.values())
    if isinstance(value, list):
        return any(uses_key(item, key) for item in value)
    return False


def schema_problems(schema: Any) -> str:
    """Why a schema's patterns will not be run (see `pattern_problem`), or ""."""
    for pattern in _patterns(schema):
        problem = pattern_problem(pattern)
        if problem:
            return problem
    if uses_key(schema, "patternProperties") and uses_key(schema, "unevaluatedProperties"):
        return "unevaluatedProperties together with patternProperties is not supported"
    return ""


def _patterns(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "pattern" and isinstance(item, str):
                yield item
            elif key == "patternProperties" and isinstance(item, dict):
                yield from item
            yield from _patterns(item)
    elif isinstance(value, list):
        for item in value:
            yield from _patterns(item)
