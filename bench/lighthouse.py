"""Lighthouse (mobile preset: a mid-range phone on a slow 4G connection, simulated) on three pages
of the real stack, failing below the thresholds: `make lighthouse`, a step of its own in CI.

    python -m bench.lighthouse [--runs 3] [--keep]

The stack is what `make run` starts (`manage.py serve`: Daphne, a Celery worker and the embedded
Redis, with DEBUG off and the built static files) on a fresh database in a temporary directory.
The pages:

- the sign-in page, signed out;
- a new chat (the home page), signed in;
- a chat of 200 messages, made the way a person makes one: questions sent through the chat's
  own form to the offline demo model, which answers them in the worker with tool calls (tool
  cards) and the workspace's components (task tables, calendars, email and meeting cards, post
  drafts), on the sample workspace `make run` seeds.

Each page is measured `--runs` times; a category's score is the median of its runs, as
Lighthouse's own guidance recommends (one run varies with whatever else the machine is doing).
Scores go to bench/results/lighthouse.json, with the audits that did not pass.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.meter import descendants

ROOT = Path(__file__).resolve().parent.parent
LIGHTHOUSE = ROOT / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = "/usr/bin/chromium"
CATEGORIES = ("performance", "accessibility", "best-practices")
# The build fails when a page's median score in a category is below this. The pages reach 100
# for accessibility and best practices every time, and 99-100 for performance (bench/RESULTS.md);
# performance alone is held at 98, because its runs measure the machine's CPU as much as the
# page: at load averages of 15-20 on this 2-core machine even the 17-element sign-in page scored
# 71-98. Each run's benchmark index and load average are printed and kept with the scores.
THRESHOLDS = {"performance": 98, "accessibility": 100, "best-practices": 100}

METRICS = ("first-contentful-paint", "largest-contentful-paint", "total-blocking-time", "cumulative-layout-shift")
PAGES = ("sign-in", "new-chat", "long-chat")
MESSAGES = 200
# Questions the demo model answers with tool calls and components (demo/), in turn; the
# last one is its long Markdown answer with a code block. (Not a post draft: that waits for the
# user's approval.)
QUESTIONS = [
    "Summarize stale tasks across projects",
    "What's on my calendar this week?",
    "Any unread emails?",
    "Summarize yesterday's meeting",
    "Show task {task_id}",
    "What time is it in Tokyo and what is 1234 * 5678?",
    "Show my open tasks",
    "A long answer, please [demo:slow]",
]
USERNAME = "lighthouse"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Site:
    """`manage.py serve` on a fresh database in `folder`, and the Django ORM on that database."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_urlsafe(16)
        self.env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "DEBUG")}
        self.env.update(
            TESSERA_VAR_DIR=str(folder / "var"),
            SECRET_KEY=secrets.token_urlsafe(50),
            DEBUG="false",
            # The demo model answers at once: seeding 200 messages is not what is measured.
            TESSERA_DEMO_TOKENS_PER_SECOND="0",
            LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.log = folder / "serve.log"

    def prepare(self) -> None:
        """The steps of `make run` before it serves, then Django in this process on the same
        database (to create the user and to follow the seeding turns)."""
        for command in (["buildstatic"], ["migrate", "--noinput", "-v0"]):
            subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=self.env, check=True)
        os.environ.update(self.env)
        os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        get_user_model().objects.create_user(USERNAME, password=self.password)
        call_command("seed_workspace", "--all", verbosity=0)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(self.port), "--concurrency", "4"],
            cwd=ROOT,
            env=self.env,
            stdout=open(self.log, "wb"),  # noqa: SIM115 - the child process owns it
            stderr=subprocess.STDOUT,
            # Its own process group, as in a terminal, where Ctrl-C reaches the whole group.
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"manage.py serve exited:\n{self.log.read_text()[-4000:]}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit("the stack did not become ready within 90 s")

    def stop(self) -> str:
        """Stops the stack as Ctrl-C would (SIGINT to every process of the group); returns what
        it printed."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                # Stuck: it and everything it started (each in a process group of its own).
                for pid in reversed(descendants(self.process.pid)):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.process.wait()
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def sign_in(self) -> httpx.Client:
        client = httpx.Client(base_url=self.url, timeout=30, follow_redirects=True)
        form = client.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
        assert token, "no CSRF token on the sign-in page"
        done = client.post(
            "/login/",
            data={"csrfmiddlewaretoken": token.group(1), "username": USERNAME, "password": self.password},
        )
        assert "sessionid" in client.cookies, f"signing in failed ({done.status_code})"
        return client

    def seed_long_chat(self, client: httpx.Client) -> str:
        """Questions sent through the chat's form until the chat holds MESSAGES messages."""
        from chat.models import Chat, Message, Turn
        from toolsets.workspace.models import Task

        task = Task.objects.filter(user__username=USERNAME).order_by("pk").first()
        assert task is not None, "the sample workspace was not seeded"
        questions = [q.format(task_id=task.pk) for q in QUESTIONS]
        headers = {"X-CSRFToken": client.cookies["csrftoken"], "Referer": self.url + "/"}
        first = client.post("/chats/new/", data={"content": questions[0]}, headers=headers)
        first.raise_for_status()
        chat = Chat.objects.get(owner__username=USERNAME)
        asked = 1
        while True:
            deadline = time.monotonic() + 60
            while Turn.objects.filter(chat=chat, status__in=Turn.ACTIVE).exists():
                if time.monotonic() > deadline:
                    raise SystemExit(f"a turn did not finish within 60 s:\n{self.log.read_text()[-4000:]}")
                time.sleep(0.1)
            failed = Turn.objects.filter(chat=chat).exclude(status=Turn.Status.COMPLETED).first()
            if failed is not None:
                raise SystemExit(f"a seeding turn ended {failed.status}: {failed.error}")
            if Message.objects.filter(chat=chat).count() >= MESSAGES:
                break
            sent = client.post(
                f"/chats/{chat.pk}/messages/",
                data={"content": questions[asked % len(questions)]},
                headers={**headers, "HX-Request": "true"},
            )
            sent.raise_for_status()
            asked += 1
        count = Message.objects.filter(chat=chat).count()
        cards = Message.objects.filter(chat=chat, role="tool").count()
        print(f"Seeded a chat of {count} messages ({asked} questions, {cards} tool results).")
        return f"/chats/{chat.pk}/"


def run_lighthouse(url: str, headers: dict[str, str], out: Path, attempts: int = 3) -> dict[str, Any]:
    headers_file = out.with_suffix(".headers.json")
    headers_file.write_text(json.dumps(headers))
    command = [
        str(LIGHTHOUSE),
        url,
        "--output=json",
        f"--output-path={out}",
        "--quiet",
        f"--only-categories={','.join(CATEGORIES)}",
        "--chrome-flags=--headless=new --no-sandbox",
        f"--extra-headers={headers_file}",
    ]
    for attempt in range(1, attempts + 1):
        done = subprocess.run(command, env={**os.environ, "CHROME_PATH": CHROMIUM}, timeout=300, check=False)
        report: dict[str, Any] = json.loads(out.read_text()) if done.returncode == 0 and out.exists() else {}
        # Lighthouse sometimes fails to record a trace (NO_NAVSTART, a busy machine): a new run.
        if report and not report.get("runtimeError"):
            return report
        print(f"Lighthouse failed on {url} (attempt {attempt} of {attempts}); running it again.", flush=True)
    raise SystemExit(f"Lighthouse failed {attempts} times on {url}")


def summary(report: dict[str, Any]) -> dict[str, Any]:
    scores = {name: round(100 * (report["categories"][name]["score"] or 0)) for name in CATEGORIES}
    # Per category, the scored audits that did not pass, and the performance opportunities
    # behind a low metric.
    failing: dict[str, dict[str, str]] = {}
    for name in CATEGORIES:
        failing[name] = {}
        for ref in report["categories"][name]["auditRefs"]:
            audit = report["audits"][ref["id"]]
            if audit["score"] is not None and audit["score"] < (1 if ref["weight"] else 0.9):
                failing[name][ref["id"]] = f"{audit['score']:.2f} {audit.get('displayValue', '')}".strip()
    metrics = {key: report["audits"][key]["numericValue"] for key in METRICS}
    transfer = sum(item.get("transferSize", 0) for item in report["audits"]["network-requests"]["details"]["items"])
    # Lighthouse's own measure of the CPU it ran on (a short benchmark before each run; lower is
    # slower): on a shared machine, the runs that scored low are the ones where it was low.
    speed = report.get("environment", {}).get("benchmarkIndex")
    return {
        "scores": scores,
        "failing": failing,
        "metrics": metrics,
        "transfer_bytes": transfer,
        "benchmark_index": speed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="Lighthouse runs per page (the median counts)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and the reports")
    parser.add_argument("--only", action="append", choices=PAGES, help="measure only this page (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "lighthouse.json")
    args = parser.parse_args()
    if not LIGHTHOUSE.exists():
        raise SystemExit("Lighthouse is not installed: run `make install`.")

    folder = Path(tempfile.mkdtemp(prefix="tessera-lighthouse-"))
    site = Site(folder)
    results: dict[str, Any] = {}
    try:
        site.prepare()
        site.start()
        client = site.sign_in()
        long_chat = site.seed_long_chat(client)
        signed_in = {"Cookie": f"sessionid={client.cookies['sessionid']}"}
        pages = {"sign-in": ("/login/", {}), "new-chat": ("/", signed_in), "long-chat": (long_chat, signed_in)}
        for name, (path, headers) in pages.items():
            if args.only and name not in args.only:
                continue
            runs = []
            for number in range(args.runs):
                report = run_lighthouse(site.url + path, headers, folder / f"{name}-{number}.json")
                runs.append({**summary(report), "load_average": round(os.getloadavg()[0], 1)})
                run = runs[-1]
                print(
                    f"{name} run {number + 1}: {run['scores']} (TBT {run['metrics']['total-blocking-time']:.0f} ms,"
                    f" benchmark index {run['benchmark_index']}, load average {run['load_average']})",
                    flush=True,
                )
            results[name] = {
                "path": path,
                "median": {c: statistics.median_low(r["scores"][c] for r in runs) for c in CATEGORIES},
                "runs": runs,
            }
    finally:
        output = site.stop()
        if args.keep:
            print(f"Kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"thresholds": THRESHOLDS, "pages": results}, indent=2) + "\n")
    failed = False
    print(f"\n{'page':<10} " + " ".join(f"{c:>15}" for c in CATEGORIES))
    for name, result in results.items():
        print(f"{name:<10} " + " ".join(f"{result['median'][c]:>15}" for c in CATEGORIES))
        for category in CATEGORIES:
            if result["median"][category] < THRESHOLDS[category]:
                failed = True
                print(f"  {category} below {THRESHOLDS[category]}; audits that did not pass:")
                for run in result["runs"]:
                    print(f"    {run['failing'][category]}")
    if "Traceback" in output:
        failed = True
        print(f"manage.py serve printed a traceback:\n{output[-4000:]}")
    print(f"\nScores: {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
