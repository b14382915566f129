"""The Django side of the benchmark, run as `python -m bench.djtasks <command>` with the stack's
environment (its database and Redis). Each command prints one JSON line last.

- `setup`: migrate, create the bench users and the `openai/bench` model pointing at the fake
  provider (the default model, as an admin would configure it), plus the demo model.
- `bigchat`: a long chat built straight in the database (scenario 4).
- `caps`: the workers' fair share (App settings: running answers per person and per token).
- `render`: GET a chat page through Django's test client, timing it server-side and counting
  SQL queries; `--profile` adds a cProfile of one render.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from itertools import pairwise
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from chat.models import Chat, LLMModel, Message, Turn  # noqa: E402
from toolsets.models import ToolExecution  # noqa: E402


def setup(args: argparse.Namespace) -> dict[str, Any]:
    call_command("migrate", interactive=False, verbosity=0)
    User = get_user_model()
    # One hash for everyone: hashing is deliberately slow and not what is measured.
    hashed = make_password(args.password)
    User.objects.bulk_create([User(username=f"bench{i}", password=hashed) for i in range(args.users)])
    bench = LLMModel.objects.create(
        name="Bench (fake provider)", model="openai/bench", api_base=args.api_base, api_key="x", is_default=True
    )
    demo, _ = LLMModel.objects.get_or_create(model="demo/tessera", defaults={"name": "Demo (offline)"})
    # The message-path scenarios run many turns per user on purpose: no fair-share caps (the
    # fair-share scenario sets them for its own runs).
    caps(argparse.Namespace(user=0, token=0))
    return {
        "users": [f"bench{i}" for i in range(args.users)],
        "bench_model": bench.pk,
        "demo_model": demo.pk,
    }


ANSWER = """Here is what I found about **item {i}**.

The result of the calculation is `{a}`, and the second one gives `{b}`. Both were computed with
the calculator tool, so they are exact; the rest of this answer explains them in a few lines.

- the first value comes from the expression `{i}*7`
- the second from `{i}+12`
- nothing else was needed

```python
print({i} * 7, {i} + 12)
```

That is all for this question."""


def _default_tools() -> dict[str, Any]:
    # Where the default selection lives has moved before; the benchmark should not care.
    try:
        from chat.selection import default_selection
    except ImportError:
        from chat.worker.tools import default_selection  # type: ignore[attr-defined, no-redef]
    return dict(default_selection())


def bigchat(args: argparse.Namespace) -> dict[str, Any]:
    """`turns` exchanges of 5 messages each: the question, an assistant message with two parallel
    tool calls, their two results, and a markdown answer. 100 turns = 500 messages, 200 cards."""
    user = get_user_model().objects.get(username=args.user)
    model = LLMModel.objects.filter(is_default=True).first()
    now = timezone.now()
    with transaction.atomic():
        chat = Chat.objects.create(owner=user, title="A long chat", model=model, enabled_tools=_default_tools())
        turns = Turn.objects.bulk_create(
            [
                Turn(
                    chat=chat, model=model, status=Turn.Status.COMPLETED, iterations=1, started_at=now, finished_at=now
                )
                for _ in range(args.turns)
            ]
        )
        for before, turn in pairwise(turns):
            turn.parent = before  # one branch, as the chat stores one
        Turn.objects.bulk_update(turns, ["parent"])
        messages: list[Message] = []
        executions: list[ToolExecution] = []
        for i, turn in enumerate(turns):
            calls: list[dict[str, Any]] = [
                {
                    "id": f"call_{turn.pk}_{p}",
                    "type": "function",
                    "function": {"name": "toolset__clock_math__calculate", "arguments": json.dumps({"expression": e})},
                }
                for p, e in enumerate([f"{i}*7", f"{i}+12"])
            ]
            messages.append(
                Message(chat=chat, turn=turn, role=Message.Role.USER, content=f"Question {i}: compute {i}*7 and {i}+12")
            )
            messages.append(
                Message(chat=chat, turn=turn, step=0, role=Message.Role.ASSISTANT, content="", tool_calls=calls)
            )
            for p, (call, value) in enumerate(zip(calls, [i * 7, i + 12], strict=True)):
                result = {"expression": json.loads(call["function"]["arguments"])["expression"], "result": value}
                messages.append(
                    Message(
                        chat=chat,
                        turn=turn,
                        step=0,
                        role=Message.Role.TOOL,
                        tool_call_id=call["id"],
                        content=json.dumps(result),
                    )
                )
                executions.append(
                    ToolExecution(
                        user=user,
                        turn=turn,
                        step=0,
                        position=p,
                        tool_call_id=call["id"],
                        toolset="clock_math",
                        tool="calculate",
                        arguments=json.loads(call["function"]["arguments"]),
                        raw_arguments=call["function"]["arguments"],
                        result=result,
                        status=ToolExecution.Status.SUCCESS,
                        attempts=1,
                        finished_at=now,
                        duration_ms=3,
                    )
                )
            messages.append(
                Message(
                    chat=chat,
                    turn=turn,
                    step=1,
                    role=Message.Role.ASSISTANT,
                    content=ANSWER.format(i=i, a=i * 7, b=i + 12),
                )
            )
        Message.objects.bulk_create(messages)
        ToolExecution.objects.bulk_create(executions)
    made: dict[str, Any] = {
        "chat": chat.pk,
        "messages": len(messages),
        "tool_cards": len(executions),
        "turns": len(turns),
    }
    if args.render:
        # One process for both: a Django start-up costs seconds, which the smoke run cannot spare.
        args.chat = chat.pk
        made["server"] = render(args)
    return made


def render(args: argparse.Namespace) -> dict[str, Any]:
    user = get_user_model().objects.get(username=args.user)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    url = f"/chats/{args.chat}/"
    times, queries, size = [], 0, 0
    for _ in range(args.repeat):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url)
            elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise SystemExit(f"GET {url} answered {response.status_code}")
        times.append(elapsed * 1000)
        queries, size = len(captured.captured_queries), len(response.content)
    result: dict[str, Any] = {
        "first_ms": round(times[0], 1),
        "median_ms": round(statistics.median(times[1:] or times), 1),
        "min_ms": round(min(times), 1),
        "queries": queries,
        "html_bytes": size,
        "query_sql": [q["sql"][:160] for q in captured.captured_queries],
    }
    if args.profile:
        import cProfile
        import io
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        client.get(url)
        profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("cumulative")
        stats.print_stats(40)
        out.write("\n--- by own time ---\n")
        stats.sort_stats("tottime").print_stats(25)
        with open(args.profile, "w") as fh:
            fh.write(out.getvalue())
        result["profile"] = args.profile
    return result


def caps(args: argparse.Namespace) -> dict[str, Any]:
    """The fair share's caps (App settings), as an admin sets them; 0: no cap."""
    from chat.models import AppSettings

    app = AppSettings.load()
    app.running_turns_per_user, app.running_turns_per_token = args.user, args.token
    app.save()
    return {"running_turns_per_user": args.user, "running_turns_per_token": args.token}


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("setup")
    p.add_argument("--users", type=int, default=8)
    p.add_argument("--password", required=True)
    p.add_argument("--api-base", required=True)
    p = sub.add_parser("bigchat")
    p.add_argument("--user", default="bench0")
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--render", action="store_true", help="then render it, as `render` does")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--profile", default="")
    p = sub.add_parser("render")
    p.add_argument("--chat", type=int, required=True)
    p.add_argument("--user", default="bench0")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--profile", default="")
    p = sub.add_parser("caps")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--token", type=int, default=0)
    args = parser.parse_args()
    result = {"setup": setup, "bigchat": bigchat, "render": render, "caps": caps}[args.command](args)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
