"""axe-core in the browser tests: injected into the page under test, never served to users.

The pages' Content-Security-Policy forbids inline scripts, so a page checked here must come from
a browser context created with ``bypass_csp=True`` (see the ``axe_page`` fixture in
test_accessibility.py); the ordinary ``page`` fixture keeps the real policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page

AXE_JS = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")

# Theme changes animate background and border colours; axe must see the settled colours.
_SETTLE = """() => document.getAnimations()
    .filter((a) => a instanceof CSSTransition)
    .forEach((a) => a.finish())"""

_RUN = """async (context) => {
  const results = await axe.run(context || document, {resultTypes: ["violations"]});
  return results.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
    nodes: v.nodes.map((n) => ({target: n.target.map(String).join(" "), summary: n.failureSummary || ""})),
  }));
}"""


def set_theme(page: Page, theme: str) -> None:
    """As the theme button sets it (static/js/chat.js toggleTheme), with transitions finished."""
    page.evaluate("(theme) => { document.documentElement.dataset.theme = theme; }", theme)
    page.evaluate(_SETTLE)


def axe_violations(page: Page, context: str | None = None) -> list[dict[str, Any]]:
    """Every axe violation on the page (or inside the ``context`` selector), as plain data."""
    if not AXE_JS.exists():
        raise RuntimeError(f"{AXE_JS} is missing: run `npm ci` (make install) first")
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE_JS))
    page.evaluate(_SETTLE)
    violations: list[dict[str, Any]] = page.evaluate(_RUN, context)
    return violations


def blocking(violations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in violations if v["impact"] in BLOCKING]


def split_known(
    page: Page, violations: list[dict[str, Any]], known: dict[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(new, known): ``known`` maps a rule id to a CSS selector of the elements it may flag for now."""
    new, found = [], []
    for v in violations:
        selector = known.get(v["id"])
        if selector is None:
            new.append(v)
            continue
        matches = [
            n["target"] for n in v["nodes"] if page.locator(n["target"]).evaluate("(el, s) => el.matches(s)", selector)
        ]
        rest = [n for n in v["nodes"] if n["target"] not in matches]
        if rest:
            new.append({**v, "nodes": rest})
        if matches:
            found.append({**v, "nodes": [n for n in v["nodes"] if n["target"] in matches]})
    return new, found


def describe(violations: list[dict[str, Any]], where: str) -> str:
    lines = []
    for v in violations:
        lines.append(f"[{where}] {v['id']} ({v['impact']}): {v['help']} — {v['helpUrl']}")
        for node in v["nodes"]:
            summary = " ".join(node["summary"].split())
            lines.append(f"    {node['target']}: {summary}")
    return "\n".join(lines)
