"""The demo model's intent for the example MCP server (a unit converter, registered by
`setup_demo` with the slug "units"): "convert 5 km to miles", "how many pounds is 3 kg",
"100 °F in celsius"."""

from __future__ import annotations

import re
from collections.abc import Iterator

from .reading import Intent, blank_urls

UNITS_TOOLSET = "mcp_units"

_UNIT = (
    r"(?:millimet(?:er|re)s?|centimet(?:er|re)s?|kilomet(?:er|re)s?|met(?:er|re)s?|inch(?:es)?|feet|foot|yards?"
    r"|miles?|grams?|kilograms?|kilos?|tonnes?|ounces?|pounds?|lbs?|millilit(?:er|re)s?|lit(?:er|re)s?|gallons?"
    r"|cups?|celsius|fahrenheit|kelvin|°\s?[cf]|mm|cm|km|m|in|ft|yd|mi|g|kg|t|oz|ml|l|gal)"
)
_NUMBER = r"-?\d+(?:[.,]\d+)?"
_CONVERT = re.compile(
    rf"(?P<value>{_NUMBER})\s*(?P<source>{_UNIT})\s+(?:to|in|into|as)\s+(?P<target>{_UNIT})\b", re.IGNORECASE
)
_HOW_MANY = re.compile(
    rf"how\s+many\s+(?P<target>{_UNIT})\s+(?:is|are|in|make|makes)\s+(?P<value>{_NUMBER})\s*(?P<source>{_UNIT})\b",
    re.IGNORECASE,
)


def match_units(message: str) -> Iterator[Intent]:
    text = blank_urls(message)
    for pattern in (_CONVERT, _HOW_MANY):
        for found in pattern.finditer(text):
            arguments = {
                "value": float(found.group("value").replace(",", ".")),
                "from_unit": found.group("source").replace(" ", ""),
                "to_unit": found.group("target").replace(" ", ""),
            }
            yield Intent("convert", UNITS_TOOLSET, arguments, found.start())
