"""Fair use of workers: another user's Send → first fragment while one user uploads many large
images, which the workers then read (decode, measure, thumbnail) in sandboxed children.

The reader sends a demo question every second, first on a quiet stack (the baseline), then from
the first upload until every uploaded file is read or failed. The figures say how far one
uploader moves everyone else's first token, and how long the uploads took to be read.
"""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

from .client import BenchError, ChatSocket, UserSession


def large_image(side: int = 1500) -> bytes:
    """A photo-sized JPEG of noise (~2 MB; 200 of them fit the default 500 MB a user may store):
    as costly to decode and thumbnail as a real photo."""
    import os

    from PIL import Image

    image = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=92)
    return out.getvalue()


Sample = tuple[float, float, float | None]  # ms: the Send's POST, its first fragment, its first text


async def _first_fragment(session: UserSession, socket: ChatSocket, chat: int) -> Sample:
    started = time.monotonic()
    turn_id = await session.send(chat, "What is 12*7?")
    posted = time.monotonic()
    await asyncio.wait_for(socket.done[turn_id].wait(), 600)
    frames = socket.turn_frames(turn_id)
    if not frames:
        raise BenchError("a demo turn finished without any fragment")
    texts = [f.at for f in frames if "beforeend:#tail-" in f.text or "beforeend:#blocks-" in f.text]
    first_text = (texts[0] - started) * 1000 if texts else None
    return (posted - started) * 1000, (frames[0].at - started) * 1000, first_text


async def run(bench: Any, files: int, parallel: int = 6, baseline_samples: int = 5) -> dict[str, Any]:
    from .figures import summary

    if len(bench.sessions) < 2:
        raise BenchError("the fairness scenario needs two users")
    uploader, reader = bench.sessions[0], bench.sessions[1]
    chat = await reader.create_chat()
    await reader.set_model(chat, bench.stack.setup["demo_model"])
    socket = ChatSocket(reader, chat)
    await socket.open()
    image = await asyncio.to_thread(large_image)
    try:
        baseline = [await _first_fragment(reader, socket, chat) for _ in range(baseline_samples)]

        uploaded: list[int] = []
        refused: dict[str, int] = {}
        slots = asyncio.Semaphore(parallel)  # what a browser opens to one host

        async def upload(n: int) -> None:
            async with slots:
                try:
                    response = await uploader.upload(f"photo-{n:03d}.jpg", image)
                except Exception as exc:  # counted, never fatal: the page would show it on the chip
                    refused[type(exc).__name__] = refused.get(type(exc).__name__, 0) + 1
                    return
            if response.status_code == 201:
                uploaded.append(int(response.json()["id"]))
            else:
                status = str(response.status_code)
                refused[status] = refused.get(status, 0) + 1

        started = time.monotonic()
        uploads = asyncio.gather(*(upload(n) for n in range(files)))
        during: list[Sample] = []  # while the files are uploaded
        reading: list[Sample] = []  # after the last upload, until every file is read
        uploads_done_at = read_done_at = None
        pending: set[int] = set()
        while time.monotonic() - started < 900:
            step = time.monotonic()
            (reading if uploads_done_at is not None else during).append(await _first_fragment(reader, socket, chat))
            if uploads_done_at is None and uploads.done():
                uploads_done_at = time.monotonic() - started
                pending = set(uploaded)
            if uploads_done_at is not None:
                states = await asyncio.gather(*(uploader.file_status(i) for i in sorted(pending)))
                pending = {i for i, state in zip(sorted(pending), states, strict=True) if state == "pending"}
                if not pending:
                    read_done_at = time.monotonic() - started
                    break
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - step)))
        await uploads
    finally:
        await socket.close()
    figures: dict[str, Any] = {
        "files": files,
        "image_bytes": len(image),
        "uploaded": len(uploaded),
        "refused": refused,
        "uploads_s": round(uploads_done_at, 1) if uploads_done_at is not None else None,
        "all_read_s": round(read_done_at, 1) if read_done_at is not None else None,
    }
    for label, samples in (("baseline", baseline), ("during", during), ("reading", reading)):
        figures[f"{label}_post_ms"] = summary([s[0] for s in samples])
        figures[f"{label}_first_frame_ms"] = summary([s[1] for s in samples])
        figures[f"{label}_first_text_ms"] = summary([s[2] for s in samples if s[2] is not None])
    print(
        f"  fairness: first text p50 {figures['baseline_first_text_ms']['p50']} ms quiet, "
        f"{figures['during_first_text_ms']['p50']} ms (max {figures['during_first_text_ms']['max']}) while "
        f"{len(uploaded)} files were uploaded ({uploads_done_at} s), {figures['reading_first_text_ms']['p50']} ms "
        f"(max {figures['reading_first_text_ms']['max']}) while they were read ({read_done_at} s); refused {refused}",
        flush=True,
    )
    return figures
