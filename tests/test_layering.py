"""The house's floors: every product package imports only the ones below it, and no product module
imports itself back through others. Imports are read from the source (at the top of a module,
inside functions, under `TYPE_CHECKING`: all of them), so a late import cannot hide an upward one.

    config/                    wiring only: settings, URLs, ASGI, Celery
      ├── accounts/            sign-in, SSO, the account page (may use hub: OAuth connections)
      ├── automations/         prompts run on a schedule or a webhook, each run a chat
      └── hub/                 what other programs call: /v1, /mcp, OAuth server, execution API
    chat/                      conversations, pages, chat/worker (turns), chat/spend
    memory/                    what the assistant remembers about a user, the Memory toolset
    notifications/             telling a user something: centre, user socket, e-mail (chat may use it)
    knowledge/                 knowledge bases: documents, indexing, search, the Knowledge toolset
    artifacts/                 documents the agent makes beside a chat: versions, panel, the Artifacts toolset
    toolsets/                  plug-in contract, registry, executor, policy, one folder a toolset
    sandbox/                   running untrusted code: the jail, sessions, the sandbox queue's task
    agent/                     the agent loop and the LiteLLM seam: plain Python, no Django
    core/                      infrastructure: imports no app
    demo/                      the offline model, apart: core and agent only
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# What chat and every floor above it may use.
_BELOW_CHAT = ("core", "agent", "sandbox", "toolsets", "knowledge", "artifacts", "memory", "notifications")
# Each package, and the product packages it may import (itself included).
FLOORS: dict[str, set[str]] = {
    "core": {"core"},
    "agent": {"core", "agent"},
    "demo": {"core", "agent", "demo"},
    "sandbox": {"core", "sandbox"},
    "toolsets": {"core", "agent", "sandbox", "toolsets"},
    "knowledge": {"core", "agent", "sandbox", "toolsets", "knowledge"},
    "artifacts": {"core", "agent", "sandbox", "toolsets", "artifacts"},
    "memory": {"core", "agent", "sandbox", "toolsets", "knowledge", "memory"},
    "notifications": {"core", "notifications"},
    "chat": {*_BELOW_CHAT, "chat"},
    "hub": {*_BELOW_CHAT, "chat", "hub"},
    "accounts": {*_BELOW_CHAT, "chat", "hub", "accounts"},
    "automations": {*_BELOW_CHAT, "chat", "automations"},
    "config": {*_BELOW_CHAT, "demo", "chat", "hub", "accounts", "automations", "config"},
}
PACKAGES = set(FLOORS)
# The loop stays plain Python: a Django (or Channels, Celery) import drags the framework into it.
FRAMEWORKS = {"django", "channels", "celery"}
PLAIN = {"agent", "demo"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files() -> dict[str, Path]:
    return {_module_name(path): path for package in sorted(PACKAGES) for path in (ROOT / package).rglob("*.py")}


MODULES = _files()


def _imports(name: str, path: Path) -> set[str]:
    """Every module `name` imports, resolved to a dotted name: `from a import b` names `a.b`
    when that is a module, else `a`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = ".".join(p for p in ((base if node.level else ""), node.module or "") if p)
            submodules = {f"{module}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(module)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _owner(name: str) -> str:
    return name.split(".", 1)[0]


def test_every_package_imports_only_its_floor_and_below() -> None:
    upward = {
        name: sorted(m for m in found if _owner(m) in PACKAGES and _owner(m) not in FLOORS[_owner(name)])
        for name, found in GRAPH.items()
    }
    assert {name: found for name, found in upward.items() if found} == {}


def test_the_agent_loop_and_the_demo_model_are_plain_python() -> None:
    framework = {
        name: sorted(m for m in found if _owner(m) in FRAMEWORKS)
        for name, found in GRAPH.items()
        if _owner(name) in PLAIN
    }
    assert {name: found for name, found in framework.items() if found} == {}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for other in edges:
                if other not in index:
                    index[other] = low[other] = len(index)
                    stack.append(other)
                    on_stack.add(other)
                    work.append((other, iter(sorted(graph[other]))))
                    break
                if other in on_stack:
                    low[node] = min(low[node], index[other])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_module_imports_itself_back() -> None:
    # A module importing its own package's __init__ (`from . import x`) is not a circle: Python
    # runs the package first anyway.
    graph = {
        name: {m for m in found if m in MODULES and not name.startswith(m + ".") and m != name}
        for name, found in GRAPH.items()
    }
    assert _cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]), ({"a": {"b"}, "b": set()}, [])],
)
def test_the_cycle_finder_finds_circles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert _cycles(graph) == expected


def test_the_floors_cover_every_product_package() -> None:
    # A new top-level app gets a floor here before it lands, or its imports go unchecked.
    apps = {p.parent.name for p in ROOT.glob("*/apps.py")} | {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert apps - {"tests", "bench"} <= PACKAGES
