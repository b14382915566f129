"""An artifact version as the document its sandboxed frame shows (static/js/artifacts.js hands it
to the sandbox proxy of toolsets.mcp.app_sandbox, on an origin that is never Tessera's).

HTML and SVG are shown as they are: the frame is an opaque origin under a policy with no
network, so what they run reaches nothing. Markdown is rendered and sanitized (nh3), code
highlighted (Pygments), a CSV laid out as an escaped table; a Mermaid diagram's source is escaped
into the page and drawn inside the frame by the Mermaid bundle the page adds at `MERMAID_SLOT`."""

from __future__ import annotations

import csv
import io
from html import escape

import markdown
import nh3
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from .models import Artifact

MERMAID_SLOT = "<!--tessera:mermaid-->"
CSV_ROWS = 5000
_FORMATTER = HtmlFormatter(noclasses=True, nowrap=True, style="default")
_BASE_CSS = """
:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--soft:#6e6e73;--line:#d8d8dc;--code:#f5f5f7}
@media (prefers-color-scheme:dark){:root{--fg:#ececef;--bg:#1c1c1f;--soft:#a1a1a8;--line:#3a3a40;--code:#26262b}}
html[data-theme=light]{--fg:#1d1d1f;--bg:#fff;--soft:#6e6e73;--line:#d8d8dc;--code:#f5f5f7;color-scheme:light}
html[data-theme=dark]{--fg:#ececef;--bg:#1c1c1f;--soft:#a1a1a8;--line:#3a3a40;--code:#26262b;color-scheme:dark}
body{margin:0;padding:20px 24px;font:15px/1.6 system-ui,-apple-system,"Segoe UI",sans-serif;
color:var(--fg);background:var(--bg)}
pre,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
pre{background:var(--code);padding:12px 14px;border-radius:8px;overflow:auto}
table{border-collapse:collapse;font-size:13.5px}
th,td{border:1px solid var(--line);padding:5px 9px;text-align:left;vertical-align:top}
th{background:var(--code)}img{max-width:100%}a{color:inherit}
.note{color:var(--soft);font-size:13px}
"""


def _page(body: str, theme: str, css: str = "") -> str:
    mode = theme if theme in ("light", "dark") else ""
    return (
        f'<!doctype html><html lang="en"{f" data-theme={mode}" if mode else ""}><head><meta charset="utf-8">'
        f"<style>{_BASE_CSS}{css}</style></head><body>{body}</body></html>"
    )


def _markdown(text: str) -> str:
    html = markdown.markdown(text, extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    return nh3.clean(html, url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer")


def _code(text: str, language: str) -> str:
    try:
        lexer = get_lexer_by_name(language) if language else TextLexer()
    except ClassNotFound:
        lexer = TextLexer()
    return f"<pre><code>{highlight(text, lexer, _FORMATTER)}</code></pre>"


def _table(text: str) -> str:
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = csv.reader(io.StringIO(text), dialect)
    out: list[str] = []
    count = 0
    try:
        for count, row in enumerate(rows):
            if count >= CSV_ROWS:
                out.append(f'</tbody></table><p class="note">Only the first {CSV_ROWS:,} rows are shown.</p>')
                return "".join(out)
            cells = "".join(
                f"<{'th' if count == 0 else 'td'}>{escape(cell)}</{'th' if count == 0 else 'td'}>" for cell in row
            )
            out.append(
                f"{'<table><thead>' if count == 0 else ''}<tr>{cells}</tr>{'</thead><tbody>' if count == 0 else ''}"
            )
    except csv.Error as exc:
        out.append(f'</tbody></table><p class="note">The table stops here: {escape(str(exc))}.</p>')
        return "".join(out)
    return "".join(out) + "</tbody></table>" if out else '<p class="note">The table is empty.</p>'


def _mermaid(text: str, theme: str) -> str:
    # securityLevel "strict": the diagram's text is escaped and its click handlers are off.
    init = (
        "<script>try{mermaid.initialize({startOnLoad:false,securityLevel:'strict',theme:"
        + ("'dark'" if theme == "dark" else "'default'")
        + "});mermaid.run({querySelector:'.mermaid'}).catch(function(e){document.getElementById('error').textContent="
        "'The diagram could not be drawn: '+((e&&e.message)||e)})}catch(e){document.getElementById('error')"
        ".textContent='The diagram could not be drawn: '+e.message}</script>"
    )
    return f'<pre class="mermaid">{escape(text)}</pre><p class="note" id="error" role="status"></p>{MERMAID_SLOT}{init}'


def document(artifact: Artifact, content: str, theme: str = "") -> str:
    """The whole HTML document of one version (the frame's `srcdoc`)."""
    kind = artifact.kind
    if kind == Artifact.Kind.HTML:
        return content
    if kind == Artifact.Kind.SVG:
        return _page(content, theme, "body{padding:12px}svg{max-width:100%;height:auto}")
    if kind == Artifact.Kind.MARKDOWN:
        return _page(_markdown(content), theme, "body{max-width:760px}")
    if kind == Artifact.Kind.CODE:
        return _page(_code(content, artifact.language), theme, "pre{background:transparent;padding:0}")
    if kind == Artifact.Kind.CSV:
        return _page(_table(content), theme)
    if kind == Artifact.Kind.MERMAID:
        return _page(_mermaid(content, theme), theme, "pre.mermaid{background:transparent}")
    return _page(f"<pre>{escape(content)}</pre>", theme)


EXTENSIONS = {"html": "html", "svg": "svg", "markdown": "md", "mermaid": "mmd", "csv": "csv"}
CONTENT_TYPES = {
    "html": "text/html",
    "svg": "image/svg+xml",
    "markdown": "text/markdown",
    "mermaid": "text/plain",
    "csv": "text/csv",
    "code": "text/plain",
}


def extension(artifact: Artifact) -> str:
    if artifact.kind != Artifact.Kind.CODE:
        return EXTENSIONS[artifact.kind]
    try:
        lexer = get_lexer_by_name(artifact.language) if artifact.language else None
    except ClassNotFound:
        lexer = None
    patterns = [p for p in (lexer.filenames if lexer else []) if p.startswith("*.") and p[2:].isalnum()]
    return patterns[0][2:] if patterns else "txt"
