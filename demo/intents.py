"""Intent detection for the offline demo model.

Each matcher reads the user's message and returns the tool calls it would make.
New intents (tasks, calendar, email, ...) are added by writing one more matcher
and appending it to ``INTENT_MATCHERS``; nothing else needs to change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from .reading import (
    _SEARCH_RE,
    CLOCK_MATH,
    EXA,
    WEB,
    Intent,
    Matcher,
    _clean_query,
    blank_urls,
    find_urls,
    split_clauses,
)
from .units import match_units
from .workspace_intents import match_workspace

# --- time ------------------------------------------------------------------

# Small and hand-picked: the demo only has to recognise the places people try first.
PLACE_TIMEZONES: dict[str, str] = {
    "tokyo": "Asia/Tokyo",
    "japan": "Asia/Tokyo",
    "osaka": "Asia/Tokyo",
    "london": "Europe/London",
    "uk": "Europe/London",
    "united kingdom": "Europe/London",
    "england": "Europe/London",
    "britain": "Europe/London",
    "new york": "America/New_York",
    "nyc": "America/New_York",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "toronto": "America/Toronto",
    "chicago": "America/Chicago",
    "denver": "America/Denver",
    "san francisco": "America/Los_Angeles",
    "los angeles": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "california": "America/Los_Angeles",
    "mexico city": "America/Mexico_City",
    "sao paulo": "America/Sao_Paulo",
    "são paulo": "America/Sao_Paulo",
    "brazil": "America/Sao_Paulo",
    "paris": "Europe/Paris",
    "france": "Europe/Paris",
    "berlin": "Europe/Berlin",
    "germany": "Europe/Berlin",
    "munich": "Europe/Berlin",
    "amsterdam": "Europe/Amsterdam",
    "madrid": "Europe/Madrid",
    "spain": "Europe/Madrid",
    "rome": "Europe/Rome",
    "italy": "Europe/Rome",
    "zurich": "Europe/Zurich",
    "stockholm": "Europe/Stockholm",
    "moscow": "Europe/Moscow",
    "istanbul": "Europe/Istanbul",
    "cairo": "Africa/Cairo",
    "johannesburg": "Africa/Johannesburg",
    "lagos": "Africa/Lagos",
    "nairobi": "Africa/Nairobi",
    "dubai": "Asia/Dubai",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "bangalore": "Asia/Kolkata",
    "bengaluru": "Asia/Kolkata",
    "india": "Asia/Kolkata",
    "singapore": "Asia/Singapore",
    "hong kong": "Asia/Hong_Kong",
    "shanghai": "Asia/Shanghai",
    "beijing": "Asia/Shanghai",
    "china": "Asia/Shanghai",
    "seoul": "Asia/Seoul",
    "korea": "Asia/Seoul",
    "bangkok": "Asia/Bangkok",
    "jakarta": "Asia/Jakarta",
    "sydney": "Australia/Sydney",
    "melbourne": "Australia/Melbourne",
    "australia": "Australia/Sydney",
    "auckland": "Pacific/Auckland",
    "new zealand": "Pacific/Auckland",
    "honolulu": "Pacific/Honolulu",
    "hawaii": "Pacific/Honolulu",
    "utc": "UTC",
    "gmt": "UTC",
}

# Longest names first so "new delhi" wins over "delhi" and "new york" is not cut short.
_PLACE_RE = re.compile(
    r"\b(?:" + "|".join(re.escape(p) for p in sorted(PLACE_TIMEZONES, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_IANA_RE = re.compile(
    r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/[A-Za-z_]+(?:/[A-Za-z_]+)?\b"
)
_TIME_TRIGGER_RE = re.compile(
    r"\bwhat(?:'s|’s|s|\s+is)?\s+the\s+time\b|\bwhat\s+time\b|\b(?:current|local)\s+time\b"
    r"|\btime\s+(?:is\s+it\s+)?(?:right\s+now\s+|now\s+)?(?:in|at|for)\b|\btime\s+is\s+it\b|\btime\s+now\b",
    re.IGNORECASE,
)


def _places(text: str) -> list[tuple[int, str]]:
    found = [(m.start(), m.group()) for m in _IANA_RE.finditer(text)]
    found += [(m.start(), PLACE_TIMEZONES[m.group().lower()]) for m in _PLACE_RE.finditer(text)]
    return sorted(found)


def match_time(message: str) -> Iterator[Intent]:
    text = blank_urls(message)
    for offset, clause in split_clauses(text):
        if not _TIME_TRIGGER_RE.search(clause):
            continue
        places = _places(clause)
        if not places and re.search(r"\bthere\b", clause, re.IGNORECASE):
            # "I'm flying to Tokyo. What time is it there?": the place is in another sentence.
            places = _places(text)
        zones = list(dict.fromkeys(zone for _, zone in places)) or ["UTC"]
        for n, zone in enumerate(zones):
            yield Intent("current_time", CLOCK_MATH, {"timezone": zone}, offset + n)


# --- arithmetic ------------------------------------------------------------

_WORD_OPERATORS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.IGNORECASE), op)
    for p, op in [
        (r"\bmultiplied\s+by\b", "*"),
        (r"\btimes\b", "*"),
        (r"\bdivided\s+by\b", "/"),
        (r"\bplus\b", "+"),
        (r"\bminus\b", "-"),
        (r"\bto\s+the\s+power\s+of\b", "^"),
        (r"\bsquared\b", "^2"),
        (r"\bcubed\b", "^3"),
        (r"\bmod(?:ulo)?\b", "%"),
        (r"(?<=[\d)])\s*[x×]\s*(?=[\d(])", "*"),
        (r"×", "*"),
        (r"÷", "/"),
        (r"[−–]", "-"),
    ]
]
_EXPRESSION_CHARS_RE = re.compile(r"[\d.\s()+\-*/^%]+")
_BINARY_OPERATION_RE = re.compile(r"[\d.)]\s*(?:\*\*|[-+*/^%])\s*[-(]*\s*[\d.(]")
# "-" and "/" alone are as likely to be a date or a range as a sum, so ask for a cue word.
_MATH_CUE_RE = re.compile(
    r"\bwhat(?:'s|’s|s|\s+is|\s+are)\b|\b(?:calculate|compute|evaluate|solve|equals?|how\s+much)\b|=",
    re.IGNORECASE,
)


def _balanced(expr: str) -> bool:
    depth = 0
    for char in expr:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


def _trim_expression(raw: str) -> str:
    expr = "".join(raw.split())
    previous = None
    while expr != previous:
        previous = expr
        expr = expr.rstrip("+-*/^%.(").lstrip("+*/^%.)")
        # Drop a stray bracket that belongs to the surrounding prose: "(what is 2+2)".
        if expr.endswith(")") and expr.count(")") > expr.count("("):
            expr = expr[:-1]
        if expr.startswith("(") and expr.count("(") > expr.count(")"):
            expr = expr[1:]
    return expr


def match_arithmetic(message: str) -> Iterator[Intent]:
    text = blank_urls(message)
    for offset, clause in split_clauses(text):
        normalized = clause
        for pattern, operator in _WORD_OPERATORS:
            normalized = pattern.sub(f" {operator} ", normalized)
        for match in _EXPRESSION_CHARS_RE.finditer(normalized):
            expr = _trim_expression(match.group())
            if not _BINARY_OPERATION_RE.search(expr) or not _balanced(expr):
                continue
            if not re.search(r"\*|\+|\^|%", expr) and not _MATH_CUE_RE.search(clause):
                continue
            yield Intent("calculate", CLOCK_MATH, {"expression": expr}, offset + match.start())


# --- search and news -------------------------------------------------------

_NEWS_RE = re.compile(r"\b(?:news|headlines)\b", re.IGNORECASE)
_NEWS_TOPIC_AFTER_RE = re.compile(
    r"\b(?:news|headlines)\s+(?:about|on|regarding|for|from|in|of|concerning)\s+(?P<topic>.+)",
    re.IGNORECASE,
)
_NEWS_FILLER = {
    "what", "what's", "whats", "is", "are", "the", "latest", "recent", "newest", "today's", "todays", "any",
    "some", "me", "tell", "show", "give", "get", "top", "breaking", "current", "new", "in", "on", "can", "you",
    "could", "please", "i", "want", "to", "know", "hear", "read", "about", "there", "a", "few",
}  # fmt: skip


def _news_query(clause: str, news_at: int) -> str:
    after = _NEWS_TOPIC_AFTER_RE.search(clause)
    if after:
        topic = _clean_query(after.group("topic"))
    else:
        # "latest AI news": the topic is whatever is left before "news" once the filler goes.
        before = clause[:news_at]
        words = [w for w in re.findall(r"[\w'’-]+", before) if w.lower() not in _NEWS_FILLER]
        topic = " ".join(words)
    topic = re.sub(r"\s+(?:today|this week|right now|now)$", "", topic, flags=re.IGNORECASE)
    return f"latest news about {topic}" if topic else "latest news"


def match_search(message: str) -> Iterator[Intent]:
    text = blank_urls(message)
    for offset, clause in split_clauses(text):
        search = _SEARCH_RE.search(clause)
        news = _NEWS_RE.search(clause)
        if search:
            query = _clean_query(search.group("query"))
        elif news:
            query = _news_query(clause, news.start())
        else:
            continue
        if query:
            yield Intent("search", EXA, {"query": query, "num_results": 5}, offset)


# --- fetching a page -------------------------------------------------------

_FETCH_CUE_RE = re.compile(
    r"\b(?:fetch|read|open|summari[sz]e|summary|tl;?dr|load|visit|look\s+at|check\s+out|what\s+does)\b",
    re.IGNORECASE,
)


def match_fetch(message: str) -> Iterator[Intent]:
    # The verb may sit in another sentence than the link ("Here: <url>. Summarize it."),
    # so this looks at the whole message rather than clause by clause.
    if not _FETCH_CUE_RE.search(blank_urls(message)):
        return
    for offset, url in find_urls(message):
        yield Intent("fetch_page", WEB, {"url": url}, offset)


_MCP_TOOL_RE = re.compile(r"\buse the ([a-z][a-z0-9_-]{0,63}) tool\b(?: with (\{[^\n]{0,2000}\}))?", re.IGNORECASE)


def match_mcp_tool(message: str) -> Iterator[Intent]:
    # "use the picture tool": an MCP server's tool, on whichever MCP toolset offers it
    # (offered_name) — how a demo shows any server's results on its cards; its arguments may
    # follow as a JSON object ('use the show tool with {"text": "hi"}').
    for match in _MCP_TOOL_RE.finditer(message):
        try:
            arguments = json.loads(match.group(2)) if match.group(2) else {}
        except ValueError:
            arguments = {}
        yield Intent(match.group(1).lower(), "mcp_", arguments if isinstance(arguments, dict) else {}, match.start())


INTENT_MATCHERS: list[Matcher] = [
    match_time,
    match_arithmetic,
    match_search,
    match_fetch,
    match_workspace,
    match_units,
    match_mcp_tool,
]


def detect_intents(message: str) -> list[Intent]:
    """All intents in the message, in reading order, without duplicates."""
    found: list[Intent] = []
    seen: set[tuple[str, str, str]] = set()
    for matcher in INTENT_MATCHERS:
        for intent in matcher(message):
            key = (intent.toolset, intent.tool, repr(sorted(intent.arguments.items())))
            if key not in seen:
                seen.add(key)
                found.append(intent)
    return sorted(found, key=lambda intent: intent.position)
