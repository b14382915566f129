"""The block syntax: an opener line, the JSON data, a closer line.

    :::component{type="task_table"}
    [{"name": "Fix login bug"}]
    :::

Only whole lines count, indented at most three spaces (four make a Markdown code block), so
`:::` in running text or an admonition (`:::note`) stays Markdown.
"""

from __future__ import annotations

import re

OPENER = re.compile(r"^ {0,3}:::component\{(?P<attrs>[^}\n]*)\}[ \t]*$")
CLOSER = re.compile(r"^ {0,3}:::[ \t]*$")
# An opener cut anywhere after `:::component`, as a streaming line can be.
_PENDING = re.compile(r"^ {0,3}:::component(?:\{(?P<attrs>[^}\n]*))?$")
_TYPE_ATTR = re.compile(r"""\btype\s*=\s*(?:"([^"\n]*)"|'([^'\n]*)'|([\w-]+))""")


def opener_type(line: str) -> str | None:
    """The type named by a `:::component{type="…"}` line ("" if it names none); None when the
    line is not an opener."""
    match = OPENER.match(line)
    return None if match is None else _type_from(match.group("attrs"))


def pending_type(line: str) -> str | None:
    """For a line still being written: the type if it may yet become an opener ("" while the
    type is not known yet), else None."""
    match = OPENER.match(line) or _PENDING.match(line)
    return None if match is None else _type_from(match.group("attrs") or "")


def _type_from(attrs: str) -> str:
    match = _TYPE_ATTR.search(attrs)
    return next((group for group in match.groups() if group is not None), "") if match else ""
