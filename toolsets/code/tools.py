"""The Code toolset: the agent runs Python in the chat's sandbox session (sandbox/): numpy, pandas
and matplotlib installed, the chat's files at /data, /output for what it makes, no network.

Variables live on between calls of a chat until its session ends (idle, or a limit broken), and
the next call says so. The card shows the code, its output as it comes, figures as pictures and
the files it wrote, which become the chat's files. It is off until an admin switches it on, for
everyone or for some groups (Toolsets in the admin).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from channels.db import database_sync_to_async
from django.conf import settings

from sandbox import client
from toolsets.base import ToolContext, ToolFailure, Toolset, plural, tool

from . import outputs

PARTIAL_EVERY_S = 0.2
# What a running card shows of each stream: its end, as a terminal would.
LIVE_CHARS = 20_000
INSTRUCTIONS = (
    "run_python runs Python 3 in a sandbox kept per chat: variables persist between calls until the "
    "session ends. numpy, pandas and matplotlib are installed; there is no network and no pip. The "
    "chat's files are read-only in /data; write files for the user to /output (the working folder), "
    "and they become the chat's files. Figures left open (or plt.show()) are shown to the user as "
    "pictures. A last expression's value is printed."
)
if settings.SANDBOX_ALLOWED_HOSTS:
    # The admin's allow-list (sandbox/netproxy.py): the model should not try anything else.
    INSTRUCTIONS = INSTRUCTIONS.replace(
        "there is no network",
        "the network reaches only these hosts (through the "
        f"proxy set in the environment): {', '.join(settings.SANDBOX_ALLOWED_HOSTS)}",
    )


def _summary(result: dict[str, Any]) -> str:
    if result.get("ended"):
        return str(result["ended"]).split(";")[0]
    if result.get("error"):
        return f"Failed: {result['error']}"[:160]
    made = [
        plural(len(result.get("figures") or []), "figure") if result.get("figures") else "",
        plural(len(result.get("files") or []), "file") if result.get("files") else "",
    ]
    made = [m for m in made if m]
    return "Ran" + (f": {', '.join(made)}" if made else "")


@tool(
    display_name="Run Python",
    timeout_s=float(settings.SANDBOX_LIMITS["wall_s"]) + client.PICKUP_S + 60,
    side_effects=True,
    # Sandboxed: it changes nothing outside its chat, so it runs without asking unless an admin
    # says otherwise.
    policy="auto",
    summarize=_summary,
    status_text=lambda args: "Running Python…",
)
async def run_python(
    ctx: ToolContext,
    code: Annotated[str, "Python 3 code to run in this chat's session"],
) -> dict[str, Any]:
    """Run Python code in a sandbox (numpy, pandas, matplotlib), with this chat's files in /data."""
    if ctx.chat_id is None or ctx.user_id is None:
        raise ToolFailure("Code runs in a chat: call this tool from a conversation.", error_type="permission_denied")
    if len(code) > 100_000:
        raise ValueError("The code is longer than 100,000 characters.")
    files = await database_sync_to_async(outputs.chat_files, thread_sensitive=False)(ctx.user_id, ctx.chat_id)
    live: dict[str, Any] = {"stdout": "", "stderr": "", "running": True, "notice": ""}
    last = 0.0

    def on_output(stream: str, text: str) -> None:
        nonlocal last
        live[stream] = (live[stream] + text)[-LIVE_CHARS:]
        if time.monotonic() - last >= PARTIAL_EVERY_S:
            last = time.monotonic()
            ctx.partial(dict(live))

    def on_notice(text: str) -> None:
        live["notice"] = text
        ctx.partial(dict(live))

    try:
        done = await client.run(ctx.chat_id, code, files, on_output, on_notice)
    except client.Unavailable as exc:
        raise ToolFailure(str(exc), retryable=False, fault=True) from exc
    written = [(str(f["name"]), _decode(f.get("data"))) for f in done.get("files") or []]
    saved = (
        await database_sync_to_async(outputs.save_files, thread_sensitive=False)(
            ctx.user_id, ctx.chat_id, ctx.turn_id, written
        )
        if written
        else []
    )
    return {
        "ok": bool(done.get("ok")),
        "error": str(done.get("error") or ""),
        "ended": str(done.get("ended") or ""),
        "notice": str(done.get("notice") or ""),
        "stdout": str(done.get("stdout") or ""),
        "stderr": str(done.get("stderr") or ""),
        "figures": [str(f) for f in done.get("figures") or []],
        "files": saved,
        "skipped": list(done.get("skipped") or []),
    }


def _decode(data: Any) -> bytes:
    import base64

    return base64.b64decode(str(data or ""))


run_python.model_text = outputs.model_text
run_python.card_template = "code/_card.html"

toolset = Toolset(
    id="code",
    name="Code",
    description="Run Python in a sandbox kept per chat: analyse your files with pandas, draw charts, write files.",
    tools=[run_python],
    instructions=INSTRUCTIONS,
    off_until_enabled=True,
)
