"""The load client: real users in a real browser's shoes, minus the browser.

A `UserSession` logs in through /login/ (CSRF cookie, form POST) and uses the UI's own
endpoints with the headers htmx sends. A `ChatSocket` is the chat page's websocket: it only
timestamps and stores frames while the load runs (parsing would slow the very loop that takes
the timestamps); `analyze_turn` does the work afterwards, replaying the frames the way the page
applies them.

How a turn's text reaches the page (chat/worker/streaming.py), and so how markers are matched:
- `<div hx-swap-oob="beforeend:#tail-T-S>:last-child">new chars</div>` appends plain words inside
  the open block's last element (as many `>:last-child` as it is deep; chat/open_block.py);
- `<div hx-swap-oob="beforeend:#blocks-T-S">html</div>`     appends finished, rendered blocks;
- `<div id="tail-T-S" class="md-tail" hx-swap-oob="true">…</div>` replaces the tail.
A marker is received at its FIRST appearance in any of them. Finished text legitimately shows
up twice (raw in a tail append, then rendered in a blocks append), so a duplicate is a marker in
two appends of the same kind, or twice in the text the page ends up showing. A marker is
reordered when it first appears in an earlier frame than a marker emitted before it.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from .fake_provider import MARKER, Plan

SEQ = re.compile(r"^<!--seq (\d+) (\d+)(?: full)?-->")
TAIL_APPEND = re.compile(r'<div hx-swap-oob="beforeend:#tail-(\d+)-(\d+)(?:>:last-child)*">(.*?)</div>', re.S)
BLOCKS_APPEND = re.compile(r'<div hx-swap-oob="beforeend:#blocks-(\d+)-(\d+)">(.*?)</div>', re.S)
TAIL_REPLACE = re.compile(r'<div id="tail-(\d+)-(\d+)" class="md-tail" hx-swap-oob="true">(.*?)</div>', re.S)
TURN_DONE = re.compile(r'id="turn-state-(\d+)" data-turn-status="(completed|failed|cancelled|interrupted)"')
TURN_ID = re.compile(r'id="turn-(\d+)"')


class BenchError(RuntimeError):
    """The harness itself broke (as opposed to a missed target)."""


# --- HTTP ---------------------------------------------------------------------------------------
class UserSession:
    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url
        self.username = username
        self.password = password
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        self.http = httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits)

    @property
    def csrf(self) -> str:
        return self.http.cookies.get("csrftoken") or ""

    @property
    def cookie_header(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.http.cookies.items())

    def _htmx(self) -> dict[str, str]:
        return {"X-CSRFToken": self.csrf, "HX-Request": "true"}

    async def login(self) -> None:
        page = await self.http.get("/login/")
        page.raise_for_status()
        response = await self.http.post(
            "/login/",
            data={"username": self.username, "password": self.password, "csrfmiddlewaretoken": self.csrf},
        )
        if response.status_code != 302 or "sessionid" not in self.http.cookies:
            raise BenchError(f"login as {self.username} failed: {response.status_code}")

    async def create_chat(self) -> int:
        """The home page's composer with nothing typed: a new, empty chat."""
        response = await self.http.post("/chats/new/", data={"content": ""}, headers=self._htmx())
        location = response.headers.get("HX-Redirect", "")
        match = re.search(r"/chats/(\d+)/", location)
        if not match:
            raise BenchError(f"creating a chat answered {response.status_code} {location!r}")
        return int(match.group(1))

    async def set_model(self, chat_id: int, model_id: int) -> None:
        """The chat settings panel, submitted with a new model and the other fields as a new
        chat has them (tool iterations limited, 5)."""
        form = {"model": str(model_id), "limit_tool_iterations": "on", "max_tool_iterations": "5"}
        response = await self.http.post(f"/chats/{chat_id}/settings/", data=form, headers=self._htmx())
        if response.status_code == 404:  # before the settings panel, the model had its own endpoint
            response = await self.http.post(f"/chats/{chat_id}/model/", data=form, headers=self._htmx())
        if response.status_code not in (200, 204):
            raise BenchError(f"setting the model answered {response.status_code}")

    async def send(self, chat_id: int, content: str) -> int:
        """The Send button: POST the composer; the answer is the exchange's HTML."""
        response = await self.http.post(f"/chats/{chat_id}/messages/", data={"content": content}, headers=self._htmx())
        if response.status_code != 200:
            raise BenchError(f"send answered {response.status_code}: {response.text[:200]}")
        match = TURN_ID.search(response.text)
        if not match:
            raise BenchError("send answered without a turn")
        return int(match.group(1))

    async def upload(self, name: str, data: bytes) -> httpx.Response:
        """The composer's paperclip: one file per request, as the page uploads it."""
        return await self.http.post("/files/", files={"file": (name, data)}, headers={"X-CSRFToken": self.csrf})

    async def file_status(self, file_id: int) -> str:
        response = await self.http.get(f"/files/{file_id}/status/")
        return str(response.json().get("status", "")) if response.status_code == 200 else "gone"

    async def page(self, chat_id: int) -> httpx.Response:
        return await self.http.get(f"/chats/{chat_id}/")

    async def close(self) -> None:
        await self.http.aclose()


# --- websocket ----------------------------------------------------------------------------------
@dataclass
class Frame:
    at: float  # time.monotonic() when recv() returned it
    text: str
    wire: int = 0  # bytes read from the socket since the previous frame (compressed, with headers)


class ChatSocket:
    """The chat page's socket. Frames are stored with their arrival time; a turn is done when
    its state fragment says so."""

    def __init__(self, session: UserSession, chat_id: int) -> None:
        self.session = session
        self.chat_id = chat_id
        self.frames: list[Frame] = []
        self.done: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self.ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self.extensions: list[str] = []

    async def open(self) -> None:
        url = self.session.base_url.replace("http://", "ws://") + f"/ws/chats/{self.chat_id}/"
        self.ws = await connect(
            url,
            additional_headers={"Cookie": self.session.cookie_header, "Origin": self.session.base_url},
            max_size=None,
            ping_interval=None,
            open_timeout=60,
        )
        self.extensions = [type(e).__name__ for e in self.ws.protocol.extensions]
        # Bytes as they arrive from the network, before websockets decompresses them: what
        # the server really pushed, permessage-deflate included when it was negotiated.
        self.wire_bytes = 0
        self._wire_seen = 0
        receive = self.ws.protocol.receive_data

        def counting(data: bytes | bytearray) -> None:
            self.wire_bytes += len(data)
            receive(data)

        self.ws.protocol.receive_data = counting  # type: ignore[method-assign]
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.ws is not None
        try:
            async for message in self.ws:
                now = time.monotonic()
                text = message if isinstance(message, str) else message.decode()
                self.frames.append(Frame(now, text, self.wire_bytes - self._wire_seen))
                self._wire_seen = self.wire_bytes
                if "data-turn-status" in text:
                    for match in TURN_DONE.finditer(text):
                        self.done[int(match.group(1))].set()
        except Exception:  # a closed socket ends the reader; the analysis reports what is missing
            pass

    def closed_by_server(self) -> bool:
        return self._reader is not None and self._reader.done()

    async def request_sync(self, turn_id: int) -> None:
        """What the page does after a reconnect: ask for the turn's exact current state."""
        assert self.ws is not None
        await self.ws.send(json.dumps({"type": "sync", "turn": turn_id}))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            await asyncio.wait([self._reader], timeout=5)

    def turn_frames(self, turn_id: int) -> list[Frame]:
        prefix = f"<!--seq {turn_id} "
        return [f for f in self.frames if f.text.startswith(prefix)]


# --- analysis -----------------------------------------------------------------------------------
@dataclass
class TurnResult:
    tag: int
    turn_id: int = 0
    plan: Plan | None = None
    post_started: float = 0.0
    post_done: float = 0.0
    first_frame: float | None = None
    first_text: float | None = None
    finished: float | None = None
    status: str = ""
    frames: int = 0
    seq_gaps: int = 0
    seq_dups: int = 0
    seq_reordered: int = 0
    expected: int = 0
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    emitted_at: list[float] = field(default_factory=list)  # per latency sample, for time series
    added_ms: list[float] = field(default_factory=list)
    # The step's first text: provider emission → socket (the sink sends it at once, no window).
    first_text_ms: float | None = None
    bytes_pushed: int = 0  # the frames' text, uncompressed
    bytes_wire: int = 0  # what came over the network for them
    final_html: int = 0
    error: str = ""
    seq_order: list[int] = field(default_factory=list)  # sequence numbers in arrival order
    # Per frame that brought new markers: (seq, arrival, emission of its first marker), for the
    # latency breakdown against the processes' traces (bench/trace.py).
    frame_log: list[tuple[int, float, float]] = field(default_factory=list)


def analyze_turn(
    result: TurnResult, frames: list[Frame], log: dict[str, Any] | None, window_s: float, sync_html: str = ""
) -> TurnResult:
    """Replays a turn's frames the way the page applies them and compares with what the fake
    provider emitted (`log`: marker index → emission time, on the same monotonic clock)."""
    plan = result.plan
    assert plan is not None
    emitted: dict[int, float] = {int(k): v for k, v in ((log or {}).get("emitted") or {}).items()}
    end_at = float((log or {}).get("end_at") or 0.0) or float("inf")
    result.expected = plan.n
    result.frames = len(frames)
    if frames:
        result.first_frame = frames[0].at
    # Sequence numbers: the page drops anything at or below the last it applied.
    last_seq = 0
    seen_seqs: set[int] = set()
    applied: list[Frame] = []
    for frame in frames:
        match = SEQ.match(frame.text)
        seq = int(match.group(2)) if match else -1
        result.seq_order.append(seq)
        if seq in seen_seqs:
            result.seq_dups += 1
        elif seq < last_seq:
            result.seq_reordered += 1
        elif seq > last_seq + 1:
            result.seq_gaps += seq - last_seq - 1
        seen_seqs.add(seq)
        if seq > last_seq:
            applied.append(frame)
            last_seq = seq
    # Page replay: per step, the rendered blocks and the raw tail.
    blocks: dict[tuple[str, str], list[str]] = defaultdict(list)
    tails: dict[tuple[str, str], str] = defaultdict(str)
    first_seen: dict[int, tuple[int, float]] = {}  # marker → (frame number, arrival)
    appended: dict[str, Counter[int]] = {"tail": Counter(), "blocks": Counter()}
    frame_new: list[list[int]] = []
    tag = plan.tag
    for number, frame in enumerate(applied):
        found: list[int] = []
        for kind, pattern in (("tail", TAIL_APPEND), ("blocks", BLOCKS_APPEND), ("replace", TAIL_REPLACE)):
            for match in pattern.finditer(frame.text):
                key = (match.group(1), match.group(2))
                content = match.group(3)
                if kind == "tail":
                    tails[key] += html.unescape(content)
                elif kind == "blocks":
                    blocks[key].append(content)
                else:
                    tails[key] = html.unescape(content)
                markers = [int(i) for t, i in MARKER.findall(content) if int(t) == tag]
                if kind in appended:
                    appended[kind].update(markers)
                found.extend(markers)
        new = []
        for index in found:
            if index not in first_seen:
                first_seen[index] = (number, frame.at)
                new.append(index)
        if new and result.first_text is None:
            result.first_text = frame.at
        frame_new.append(new)
    # What the page shows in the end.
    visible = "".join("".join(blocks[k]) + tails[k] for k in sorted(set(blocks) | set(tails)))
    shown = [int(i) for t, i in MARKER.findall(visible) if int(t) == tag]
    shown_counts = Counter(shown)
    result.received = len(first_seen)
    result.lost = sum(1 for i in range(plan.n) if i not in first_seen or shown_counts[i] == 0)
    result.duplicated = sum(
        1 for i in range(plan.n) if shown_counts[i] > 1 or appended["tail"][i] > 1 or appended["blocks"][i] > 1
    )
    latest_frame = -1
    for i in range(plan.n):
        if i not in first_seen:
            continue
        number = first_seen[i][0]
        if number < latest_frame:
            result.reordered += 1
        latest_frame = max(latest_frame, number)
    if shown != sorted(shown):
        result.reordered = max(result.reordered, 1)
    # Latency: emission → first arrival. "Added": beyond the batching the design intends, i.e.
    # after the moment the batch holding the marker was due (its first token + the window, or
    # the end of the stream if that came first; the step's first text is due at once).
    for number, new in enumerate(frame_new):
        stamped = [i for i in new if i in emitted]
        if not stamped:
            continue
        arrival = applied[number].at
        match = SEQ.match(applied[number].text)
        if match:
            result.frame_log.append((int(match.group(2)), arrival, min(emitted[i] for i in stamped)))
        due = min(min(emitted[i] for i in stamped) + window_s, end_at)
        if 0 in stamped:
            due = emitted[0]
            result.first_text_ms = (arrival - emitted[0]) * 1000
        for i in stamped:
            result.latencies_ms.append((arrival - emitted[i]) * 1000)
            result.emitted_at.append(emitted[i])
            result.added_ms.append((arrival - max(due, emitted[i])) * 1000)
    texts = [f.text for f in frames]
    result.bytes_pushed = sum(len(t.encode()) for t in texts)
    result.bytes_wire = sum(f.wire for f in frames)
    if sync_html:
        body = SEQ.sub("", sync_html, count=1).replace(' hx-swap-oob="true"', "", 1)
        result.final_html = len(body.encode())
    return result


# --- the floor: the fake provider straight to a client ------------------------------------------
async def floor_stream(provider_url: str, plan: Plan) -> dict[int, float]:
    """Streams one completion from the fake provider with nothing in between; returns marker →
    arrival time. A raw HTTP/1.1 reader: the least work a client can do for the same bytes."""
    host, port = provider_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    body = json.dumps(
        {"model": "bench", "stream": True, "messages": [{"role": "user", "content": f"floor {plan.directive()}"}]}
    ).encode()
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    arrivals: dict[int, float] = {}
    tag = plan.tag
    try:
        await reader.readuntil(b"\r\n\r\n")
        while True:
            size_line = await reader.readline()
            size = int(size_line.strip() or b"0", 16)
            if size == 0:
                break
            data = await reader.readexactly(size + 2)
            now = time.monotonic()
            # Parsed like any SSE client must: the JSON escapes hide word boundaries ("\\n\\nq1v20").
            for line in data.decode().splitlines():
                if not line.startswith("data: {"):
                    continue
                for choice in json.loads(line[6:]).get("choices") or []:
                    content = (choice.get("delta") or {}).get("content") or ""
                    for t, i in MARKER.findall(content):
                        if int(t) == tag:
                            arrivals.setdefault(int(i), now)
    finally:
        writer.close()
    return arrivals


async def provider_log(provider_url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.get(f"{provider_url}/_bench/log")
        response.raise_for_status()
        return response.json()  # type: ignore[no-any-return]


async def provider_stats(provider_url: str) -> dict[str, int]:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.get(f"{provider_url}/_bench/stats")
        response.raise_for_status()
        return response.json()  # type: ignore[no-any-return]
