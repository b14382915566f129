"""Tessera's example MCP server: a unit converter, over stdio, built with the official SDK.

`make run` registers it (`manage.py setup_demo`) so a new install shows an MCP toolset working
offline. Run by hand: `python -m toolsets.mcp.example_server`. It imports nothing from Tessera.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

# unit → (dimension, factor to the dimension's base unit). Temperatures are handled apart.
UNITS: dict[str, tuple[str, Decimal]] = {
    "mm": ("length", Decimal("0.001")),
    "cm": ("length", Decimal("0.01")),
    "m": ("length", Decimal(1)),
    "km": ("length", Decimal(1000)),
    "in": ("length", Decimal("0.0254")),
    "ft": ("length", Decimal("0.3048")),
    "yd": ("length", Decimal("0.9144")),
    "mi": ("length", Decimal("1609.344")),
    "g": ("mass", Decimal("0.001")),
    "kg": ("mass", Decimal(1)),
    "t": ("mass", Decimal(1000)),
    "oz": ("mass", Decimal("0.028349523125")),
    "lb": ("mass", Decimal("0.45359237")),
    "ml": ("volume", Decimal("0.001")),
    "l": ("volume", Decimal(1)),
    "gal": ("volume", Decimal("3.785411784")),
    "cup": ("volume", Decimal("0.2365882365")),
    "c": ("temperature", Decimal(1)),
    "f": ("temperature", Decimal(1)),
    "k": ("temperature", Decimal(1)),
}
ALIASES = {
    "millimeter": "mm",
    "millimeters": "mm",
    "centimeter": "cm",
    "centimeters": "cm",
    "meter": "m",
    "meters": "m",
    "metre": "m",
    "metres": "m",
    "kilometer": "km",
    "kilometers": "km",
    "kilometre": "km",
    "kilometres": "km",
    "inch": "in",
    "inches": "in",
    "foot": "ft",
    "feet": "ft",
    "yard": "yd",
    "yards": "yd",
    "mile": "mi",
    "miles": "mi",
    "gram": "g",
    "grams": "g",
    "kilogram": "kg",
    "kilograms": "kg",
    "kilo": "kg",
    "kilos": "kg",
    "tonne": "t",
    "tonnes": "t",
    "ounce": "oz",
    "ounces": "oz",
    "pound": "lb",
    "pounds": "lb",
    "lbs": "lb",
    "milliliter": "ml",
    "milliliters": "ml",
    "liter": "l",
    "liters": "l",
    "litre": "l",
    "litres": "l",
    "gallon": "gal",
    "gallons": "gal",
    "cups": "cup",
    "celsius": "c",
    "°c": "c",
    "fahrenheit": "f",
    "°f": "f",
    "kelvin": "k",
}

server = MCPServer(
    name="Tessera unit converter",
    version="1.0",
    instructions="Converts lengths, masses, volumes and temperatures between units.",
)


def unit(name: str) -> str:
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in UNITS:
        raise ValueError(f"Unknown unit {name!r}. Known: {', '.join(sorted(UNITS))}.")
    return key


def convert_value(value: Decimal, source: str, target: str) -> Decimal:
    if UNITS[source][0] != UNITS[target][0]:
        raise ValueError(f"Cannot convert {UNITS[source][0]} ({source}) to {UNITS[target][0]} ({target}).")
    if UNITS[source][0] == "temperature":
        kelvin = {"c": value + Decimal("273.15"), "f": (value - 32) * 5 / 9 + Decimal("273.15"), "k": value}[source]
        return {"c": kelvin - Decimal("273.15"), "f": (kelvin - Decimal("273.15")) * 9 / 5 + 32, "k": kelvin}[target]
    return value * UNITS[source][1] / UNITS[target][1]


@server.tool(title="Convert units", annotations=ToolAnnotations(read_only_hint=True))
async def convert(
    value: Annotated[float, Field(description="The amount to convert")],
    from_unit: Annotated[str, Field(description="The unit it is in, e.g. km, lb, °F")],
    to_unit: Annotated[str, Field(description="The unit wanted, e.g. mi, kg, °C")],
    ctx: Context,
) -> str:
    """Convert an amount between units of length, mass, volume or temperature."""
    source, target = unit(from_unit), unit(to_unit)
    # Progress the card can show: a real converter is instant, this one shows how it works.
    await ctx.report_progress(1, 3, f"Looking up {source} and {target}")
    await asyncio.sleep(0.4)
    await ctx.report_progress(2, 3, f"Converting {value:g} {source} to {target}")
    await asyncio.sleep(0.4)
    result = convert_value(Decimal(str(value)), source, target)
    await ctx.report_progress(3, 3, "Done")
    shown = f"{result:.6g}" if abs(result) < Decimal("1e15") else f"{result:.6e}"
    return f"**{value:g} {source} = {shown} {target}**"


@server.tool(title="List units", annotations=ToolAnnotations(read_only_hint=True))
def list_units() -> dict[str, list[str]]:
    """List the units the converter knows, by dimension."""
    found: dict[str, list[str]] = {}
    for name, (dimension, _) in UNITS.items():
        found.setdefault(dimension, []).append(name)
    return found


if __name__ == "__main__":
    server.run("stdio")
