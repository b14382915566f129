"""The documentation's own checks that MkDocs's strict build does not make: every picture the
docs and the README use is one the screenshot tests take (so none goes stale), every picture
they take is used, the README's links into docs/ lead somewhere, and the README still opens
with the two commands."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests.e2e.test_docs_screenshots import IMAGES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
IMAGE_LINK = re.compile(r"\]\(((?:\.\./)*(?:docs/)?images/([\w.-]+)\.png)(?:#[\w-]+)?\)")
LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#[^)]*)?\)")


def pages() -> list[Path]:
    return [*DOCS.rglob("*.md"), ROOT / "README.md"]


def used_images() -> dict[str, list[str]]:
    used: dict[str, list[str]] = {}
    for page in pages():
        for _, name in IMAGE_LINK.findall(page.read_text()):
            used.setdefault(name, []).append(str(page.relative_to(ROOT)))
    return used


def test_every_picture_the_docs_use_is_taken_by_the_screenshot_tests() -> None:
    used = used_images()
    assert used, "no pictures found: has the image link pattern changed?"
    unknown = {name: where for name, where in used.items() if name not in IMAGES}
    assert not unknown, f"pictures no test takes (add them to tests/e2e/test_docs_screenshots.py): {unknown}"
    missing = [name for name in used if not (DOCS / "images" / f"{name}.png").exists()]
    assert not missing, f"run `make docs` to take: {missing}"


def test_every_picture_taken_is_used_and_nothing_else_is_in_the_folder() -> None:
    unused = set(IMAGES) - set(used_images())
    assert not unused, f"pictures taken but used nowhere: {sorted(unused)}"
    stray = {p.stem for p in (DOCS / "images").glob("*.png")} - set(IMAGES)
    assert not stray, f"pictures in docs/images/ that no test takes: {sorted(stray)}"


def test_the_readme_links_into_the_docs_lead_somewhere() -> None:
    readme = (ROOT / "README.md").read_text()
    links = LINK.findall(readme)
    assert len(links) > 20
    broken = [link for link in links if not (ROOT / link).exists()]
    assert not broken, broken
    # Every page the README links to is in the site's navigation (MkDocs checks the rest).
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = yaml.safe_dump(config["nav"])
    for link in links:
        if link.endswith(".md"):
            assert link.removeprefix("docs/") in nav, f"{link} is not in mkdocs.yml's nav"


def test_the_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().splitlines()[:8]
    assert any(line.startswith("make run ") for line in head)
    assert any(line.startswith("make test ") for line in head)
    assert len((ROOT / "README.md").read_text().splitlines()) < 200
