"""Where a fragment's time goes, from the fake provider to the bench client.

The worker and web processes of a benchmark stack append one line per fragment to
`$BENCH_TRACE-<pid>.log` (hooks installed by bench/settings.py, never in production), all on
`time.monotonic()`, which is one clock for every process of the machine:

    worker: flush  <turn> <seq> <batch_start> <flush_start> <send_start> <send_end>
    web:    recv   <turn> <seq> <received> <sent>

`batch_start` is when the worker got the batch's first token from LiteLLM. Joined with the
client's arrival time and the fake provider's emission time of the same frame, each frame's
added latency splits into the stages below; `breakdown()` gives their p50 / p99.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

STAGES = [
    ("provider → worker (stream parse, loop wake-up)", "provider_to_worker"),
    ("window timer late", "timer_late"),
    ("render + live state JSON", "render_and_state"),
    ("state SET + publish (written; the reply not awaited)", "group_send"),
    ("channel layer → web process", "layer_to_web"),
    ("web process: consumer + socket write", "web_send"),
    ("web socket write → client", "to_client"),
]


def _trace_log(path: str) -> Any:
    """The process's trace file, written through a buffer and flushed once a second by a
    thread: a write (a system call) per fragment was 2–3 % of the worker's CPU in its profile,
    the instrument's cost counted as Tessera's. `breakdown()` reads the files after the one-chat
    runs and their floor, seconds after their last line."""
    import os
    import threading

    log = open(f"{path}-{os.getpid()}.log", "a", buffering=1 << 16)  # noqa: SIM115

    def flush() -> None:
        while True:
            time.sleep(1.0)
            log.flush()

    threading.Thread(target=flush, name="bench-trace", daemon=True).start()
    return log


def install_worker_hooks(path: str) -> None:
    from chat import live
    from chat.worker import streaming

    log = _trace_log(path)
    original_text = streaming.TurnSink.text
    original_flush = streaming.TurnSink.flush
    original_send = live.send_fragment

    async def text(self: Any, step: int, delta: str, lane: str = "") -> None:
        if self._flush_handle is None and getattr(self, "_bench_batch", None) is None:
            self._bench_batch = time.monotonic()
        await original_text(self, step, delta, lane)

    # The sink's own timestamps reach the send through these (one flush per turn at a time).
    _current_sink_batch: dict[int, float] = {}
    _current_flush: dict[int, float] = {}

    def flush_started(sink: Any) -> None:
        _current_flush[sink.turn_id] = time.monotonic()
        batch = getattr(sink, "_bench_batch", None)
        if batch is not None:
            _current_sink_batch[sink.turn_id] = batch
            sink._bench_batch = None

    def sent(turn_id: int, seq: int, start: float) -> None:
        sink_batch = _current_sink_batch.pop(turn_id, None)
        flush_start = _current_flush.pop(turn_id, start)
        end = time.monotonic()
        log.write(f"flush {turn_id} {seq} {sink_batch or 0:.6f} {flush_start:.6f} {start:.6f} {end:.6f}\n")

    async def send_fragment(chat_id: int, turn_id: int, seq: int, html: str, layer: Any = None, **options: Any) -> None:
        start = time.monotonic()
        await original_send(chat_id, turn_id, seq, html, layer, **options)
        sent(turn_id, seq, start)

    async def flush_recording(self: Any, extra: str = "") -> None:
        flush_started(self)
        await original_flush(self, extra)

    original_window_over = streaming.TurnSink._window_over
    original_publish_nowait = live.LiveTurn.publish_nowait

    def window_over(self: Any) -> None:
        flush_started(self)
        original_window_over(self)

    def publish_nowait(self: Any, send: Any, html: str) -> None:
        # Written without waiting for the reply: the "round trip" stage is the write alone.
        start = time.monotonic()
        original_publish_nowait(self, send, html)
        sent(self.id, self.seq, start)

    streaming.TurnSink.text = text  # type: ignore[method-assign]
    streaming.TurnSink.flush = flush_recording  # type: ignore[method-assign]
    streaming.TurnSink._window_over = window_over  # type: ignore[method-assign]
    live.send_fragment = send_fragment  # type: ignore[assignment]
    live.LiveTurn.publish_nowait = publish_nowait  # type: ignore[method-assign]


def install_web_hooks(path: str) -> None:
    from chat import consumers

    log = _trace_log(path)
    original = consumers.ChatConsumer.chat_fragment

    async def chat_fragment(self: Any, event: Any) -> None:
        received = time.monotonic()
        await original(self, event)
        log.write(f"recv {event['turn']} {event['seq']} {received:.6f} {time.monotonic():.6f}\n")

    consumers.ChatConsumer.chat_fragment = chat_fragment  # type: ignore[method-assign]


def read(logs: Path) -> tuple[dict[tuple[int, int], list[float]], dict[tuple[int, int], list[float]]]:
    worker: dict[tuple[int, int], list[float]] = {}
    web: dict[tuple[int, int], list[float]] = {}
    for path in logs.glob("trace-*.log"):
        for line in path.read_text().splitlines():
            kind, turn, seq, *times = line.split()
            key = (int(turn), int(seq))
            (worker if kind == "flush" else web)[key] = [float(t) for t in times]
    return worker, web


def breakdown(frames: list[tuple[int, int, float, float]], logs: Path, window_s: float) -> dict[str, Any]:
    """`frames`: (turn, seq, arrival at the client, emission of the frame's first marker)."""
    from .figures import pct

    worker, web = read(logs)
    stages: dict[str, list[float]] = {key: [] for _, key in STAGES}
    joined = 0
    for turn, seq, arrival, emitted in frames:
        w, r = worker.get((turn, seq)), web.get((turn, seq))
        if not w or not r or not w[0]:
            continue  # not a timed text batch (e.g. a tool card), or a trace line is missing
        batch, flush_start, send_start, send_end = w
        received, sent = r
        joined += 1
        values = {
            "provider_to_worker": batch - emitted,
            "timer_late": flush_start - (batch + window_s),
            "render_and_state": send_start - flush_start,
            "group_send": send_end - send_start,
            "layer_to_web": received - send_start,
            "web_send": sent - received,
            "to_client": arrival - sent,
        }
        for key, value in values.items():
            stages[key].append(value * 1000)
    return {
        "frames": joined,
        "stages_ms": {key: {"p50": pct(stages[key], 50), "p99": pct(stages[key], 99)} for _, key in STAGES},
    }
