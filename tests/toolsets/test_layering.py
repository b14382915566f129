"""The plug-in layer stands on its own: nothing under toolsets/ imports the chat app (shared
pieces live in core/), and the MCP package's modules import each other in one direction."""

from __future__ import annotations

import ast
from pathlib import Path

TOOLSETS = Path(__file__).resolve().parents[2] / "toolsets"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside functions, resolved to a dotted name."""
    package = ".".join(path.relative_to(TOOLSETS.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            # `from . import x` names modules, not attributes
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_nothing_under_toolsets_imports_the_chat_app() -> None:
    offenders = {
        str(path.relative_to(TOOLSETS.parent)): sorted(
            m for m in _imports(path) if m == "chat" or m.startswith("chat.")
        )
        for path in TOOLSETS.rglob("*.py")
    }
    assert {path: found for path, found in offenders.items() if found} == {}


def test_the_mcp_package_imports_in_one_direction() -> None:
    package = TOOLSETS / "mcp"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    graph = {
        name: {m.rsplit(".", 1)[1] for m in _imports(package / f"{name}.py") if m.startswith("toolsets.mcp.")} & modules
        for name in modules
    }
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        assert name not in visiting, "import cycle: " + " → ".join([*visiting[visiting.index(name) :], name])
        if name in done:
            return
        visiting.append(name)
        for other in sorted(graph[name]):
            visit(other)
        visiting.pop()
        done.add(name)

    for name in sorted(modules):
        visit(name)
