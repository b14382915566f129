"""The demo model and the Artifacts toolset: "make an HTML page about X" writes a small page (with
a script, to show it runs sandboxed), "draw a diagram/flowchart of X" a Mermaid diagram, "make
an SVG" a picture; and "change the heading to Y" revises the last page it made in the chat."""

from __future__ import annotations

import html
import re

from .reading import Intent

ARTIFACTS = "artifacts"
_MAKE = r"\b(?:make|create|build|draft|write|design|draw|generate|sketch)\b"
_PAGE = re.compile(_MAKE + r".*?\b(?:html|web ?page|landing page|one-page|page|report|artifact)\b", re.IGNORECASE)
_DIAGRAM = re.compile(_MAKE + r".*?\b(?:diagram|flow ?chart|mermaid)\b", re.IGNORECASE)
_SVG = re.compile(_MAKE + r".*?\b(?:svg|logo|icon)\b", re.IGNORECASE)
_ABOUT = re.compile(r"\b(?:about|for|of|on)\s+(?P<topic>[^.?!\n]{2,60})", re.IGNORECASE)
_HEADING = re.compile(
    r"\b(?:change|rename|set)\b.*?\b(?:heading|title)\b.*?\bto\s+[\"“']?(?P<new>[^\"”'\n]{1,80})", re.IGNORECASE
)
_MADE = re.compile(r"Artifact (?P<id>\d+) “(?P<title>[^”]*)” \(html\)")

_PAGE_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font:16px/1.6 system-ui,sans-serif;margin:0;color:#1f2937;background:#f8fafc}}
header{{background:linear-gradient(135deg,#4f46e5,#0ea5e9);color:#fff;padding:40px 32px}}
h1{{margin:0 0 6px;font-size:30px}} main{{padding:24px 32px;max-width:720px}}
.card{{background:#fff;border:1px solid #e5e7eb;border-radius:12px;padding:16px 20px;margin:14px 0}}
button{{font:inherit;padding:8px 14px;border-radius:8px;border:0;background:#4f46e5;color:#fff;cursor:pointer}}
</style></head>
<body>
<header><h1>{title}</h1><p>A one-page draft, written by Tessera's demo model.</p></header>
<main>
<div class="card"><h2>Why it matters</h2>
<p>{topic} deserves a clear, short page: what it is, who it is for, and what to do next.</p></div>
<div class="card"><h2>Next steps</h2>
<ol><li>Say what you want changed.</li><li>Or edit this page yourself in the panel.</li></ol></div>
<div class="card"><p>This page runs its own script, in a sandbox:
<button type="button" id="count">Clicked 0 times</button></p></div>
</main>
<script>let n=0;
document.getElementById("count").addEventListener("click",e=>{{
n++;e.target.textContent="Clicked "+n+" time"+(n===1?"":"s")}});</script>
</body></html>
"""
_DIAGRAM_SOURCE = """flowchart LR
    A[{topic}] --> B{{Plan}}
    B -->|small| C[Do it now]
    B -->|large| D[Split into steps]
    D --> E[Review]
    C --> E
    E --> F((Done))
"""
_SVG_SOURCE = """<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 200" width="200" height="200"
  role="img" aria-label="{title}">
  <defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">
  <stop offset="0" stop-color="#4f46e5"/><stop offset="1" stop-color="#0ea5e9"/></linearGradient></defs>
  <rect x="10" y="10" width="180" height="180" rx="36" fill="url(#g)"/>
  <path d="M60 70h80M100 70v80" stroke="#fff" stroke-width="18" stroke-linecap="round"/>
</svg>
"""


def _topic(message: str, fallback: str) -> str:
    found = _ABOUT.search(message)
    topic = " ".join(found["topic"].split()).strip(" ,;:") if found else ""
    return (topic[:1].upper() + topic[1:]) if topic else fallback


def intents(message: str, history: str = "") -> list[Intent]:
    """`history`: the chat's earlier tool results, where the page to revise is named."""
    heading = _HEADING.search(message)
    made = list(_MADE.finditer(history))
    if heading and made:
        new = html.escape(heading["new"].strip())
        return [
            Intent(
                "update_artifact",
                ARTIFACTS,
                {
                    "artifact_id": int(made[-1]["id"]),
                    "old_text": f"<h1>{html.escape(made[-1]['title'])}</h1>",
                    "new_text": f"<h1>{new}</h1>",
                    "title": heading["new"].strip(),
                },
            )
        ]
    text = " ".join(message.split())
    if _DIAGRAM.search(text):
        topic = _topic(text, "Request")
        label = re.sub(r"[\[\]{}()|\"<>]", " ", topic)
        return [
            Intent(
                "create_artifact",
                ARTIFACTS,
                {"title": f"Diagram: {topic}", "kind": "mermaid", "content": _DIAGRAM_SOURCE.format(topic=label)},
            )
        ]
    if _SVG.search(text):
        title = _topic(text, "Logo")
        return [
            Intent(
                "create_artifact",
                ARTIFACTS,
                {"title": title, "kind": "svg", "content": _SVG_SOURCE.format(title=html.escape(title))},
            )
        ]
    if _PAGE.search(text):
        topic = _topic(text, "Our launch")
        return [
            Intent(
                "create_artifact",
                ARTIFACTS,
                {
                    "title": topic,
                    "kind": "html",
                    "content": _PAGE_HTML.format(title=html.escape(topic), topic=html.escape(topic)),
                },
            )
        ]
    return []


def answer(content: str) -> str:
    found = re.match(r"Artifact \d+ “(?P<title>[^”]*)” \((?P<kind>\w+)\) is at version (?P<version>\d+)", content)
    if not found:
        return f"The artifact tool said: {content[:300]}"
    if found["version"] == "1":
        return f"I made **{found['title']}**: it is open beside the chat. Edit it there, or tell me what to change."
    return f"I updated **{found['title']}** (version {found['version']}): switch between versions in the panel."
