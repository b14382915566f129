"""No product module over 450 lines: past that a module is usually two ideas, and is split by
idea. Settings and data tables are lists, not ideas, and may be longer; tests, migrations and
what is installed or built are not product modules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 450
SKIPPED_FOLDERS = {
    ".venv",
    "node_modules",
    ".cache",
    "build",
    "staticfiles",
    "migrations",
    "tests",
    # Not product code: run data, the built site, tool caches and version control.
    "var",
    "site",
    ".git",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
}
# Settings read from the environment, one after another.
SETTINGS = {"config/settings.py"}
# Data tables: none is over the limit today; one would be named here with what it holds.
DATA_TABLES: set[str] = set()


def product_modules() -> list[Path]:
    found = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if SKIPPED_FOLDERS & set(relative.parts[:-1]):
            continue
        if relative.as_posix() in SETTINGS | DATA_TABLES:
            continue
        found.append(path)
    return found


def test_the_walk_finds_the_product_and_leaves_out_what_is_not() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in product_modules()}
    assert {"agent/loop.py", "chat/views.py", "bench/run.py", "manage.py"} <= names
    assert "config/settings.py" not in names
    assert not any(name.startswith(("tests/", ".venv/")) or "/migrations/" in name for name in names)


def test_no_product_module_is_over_450_lines() -> None:
    long = {
        path.relative_to(ROOT).as_posix(): count
        for path in product_modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
    }
    assert not long, f"split by idea: {long}"
