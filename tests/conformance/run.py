"""Runs the official MCP conformance suite's client scenarios against Tessera's MCP client.

    python -m tests.conformance.run [--spec-version 2026-07-28] [SCENARIO ...]

Two lines of the suite are installed: today's (npm `@modelcontextprotocol/conformance` 0.1.x, every
client scenario `conformance list` shows) and the newest (npm alias `conformance-next`, 0.2.0-alpha),
which freezes what each protocol revision requires: with `--spec-version 2026-07-28` the run takes
the client scenarios `conformance list --requirements 2026-07-28` says that revision requires and
runs each at that revision's wire (`--spec-version 2026-07-28`). Either way every scenario (or the
ones named) is run with tests/conformance/mcp_client.py as the client. A scenario passes when the suite ran at least one
check and none failed or warned. The run fails on a scenario that fails without being listed in
expected-failures.yml, on a listed one that passes (the list must not go stale), on a listed one
without a reason, and when no check ran at all (a client that does nothing "passes" 0/0).

The clients share one migrated database template and one embedded Redis, made here; each client
copies the template, so scenarios never see each other's state.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NODE = ROOT / "node_modules" / ".bin" / "node"
# Both packages install a `conformance` bin, so node_modules/.bin/conformance is whichever npm
# linked last: each line is run from its own package.
CONFORMANCE = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
CONFORMANCE_NEXT = ROOT / "node_modules" / "conformance-next" / "dist" / "index.js"
# The revisions the newest line is run at (its frozen requirements), beside today's run.
REVISIONS = ("2026-07-28",)
EXPECTED = HERE / "expected-failures.yml"
CLIENT = f"{sys.executable} -m tests.conformance.mcp_client"
SCENARIO_TIMEOUT_MS = 60_000


def suite(*args: str, revision: str = "", **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The suite's CLI under Node 22 (npm `node@22`: it needs fs.globSync): today's line, or the
    newest line when a protocol revision is named."""
    cli = CONFORMANCE_NEXT if revision else CONFORMANCE
    return subprocess.run([str(NODE), str(cli), *args], cwd=ROOT, text=True, capture_output=True, **kwargs)


def scenarios(kind: str, revision: str = "") -> list[str]:
    """The suite's own list of `kind` ("Client" or "Server") scenarios; with a revision, the ones
    it requires (the extensions and later additions it lists apart are never scored)."""
    if revision:
        listed = suite("list", "--requirements", revision, revision=revision, check=True).stdout
        listed = listed.split("Run and reported, but never scored", 1)[0]
    else:
        listed = suite("list", check=True).stdout
    section = listed.split(f"{kind} scenarios", 1)[1].split("scenarios (", 1)[0]
    return re.findall(r"^\s+- (\S+)", section, flags=re.MULTILINE)


def expected_failures(kind: str, revision: str = "") -> dict[str, str]:
    """`kind` ("client" / "server") → {scenario: reason}; every entry must say why. A revision's
    run reads its own section (`client@2026-07-28`)."""
    data = yaml.safe_load(EXPECTED.read_text()) or {}
    section = f"{kind}@{revision}" if revision else kind
    found = data.get(section) or {}
    if not isinstance(found, dict):
        raise SystemExit(f"{EXPECTED.name}: '{section}' must map each scenario to its reason")
    for name, reason in found.items():
        if not isinstance(reason, str) or len(reason.strip()) < 20:
            raise SystemExit(f"{EXPECTED.name}: {section} scenario {name} needs a precise reason")
    return found


@dataclass
class Outcome:
    scenario: str
    passed: int
    failed: int
    warnings: int
    failures: list[str]
    output: str

    @property
    def ok(self) -> bool:
        return self.passed > 0 and self.failed == 0 and self.warnings == 0

    @property
    def verdict(self) -> str:
        """The suite's own summary line ("Passed: X/Y, Z failed, W warnings"), when it printed one."""
        found = re.findall(r"^Passed: .*$", self.output, flags=re.MULTILINE)
        return found[-1].strip() if found else "no summary"


def read_checks(folder: Path, output: str, scenario: str) -> Outcome:
    checks: list[dict[str, Any]] = []
    for path in folder.rglob("checks.json"):
        checks += json.loads(path.read_text())
    statuses = [c.get("status") for c in checks]
    failures = [
        f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
        for c in checks
        if c.get("status") == "FAILURE"
    ]
    return Outcome(
        scenario, statuses.count("SUCCESS"), statuses.count("FAILURE"), statuses.count("WARNING"), failures, output
    )


def run_client(scenario: str, env: dict[str, str], results: Path, revision: str = "") -> Outcome:
    folder = results / scenario.replace("/", "_")
    shutil.rmtree(folder, ignore_errors=True)
    wire = ["--spec-version", revision] if revision else []
    done = suite(
        "client",
        "--scenario",
        scenario,
        *wire,
        "--command",
        CLIENT,
        "--timeout",
        str(SCENARIO_TIMEOUT_MS),
        "-o",
        str(folder),
        revision=revision,
        env=env,
        timeout=SCENARIO_TIMEOUT_MS / 1000 + 60,
    )
    outcome = read_checks(folder, done.stdout + done.stderr, scenario)
    if done.returncode != 0 and outcome.failed == 0:
        # The suite failed the run for a reason of its own (the client crashed, timed out).
        outcome.failed = 1
        outcome.failures.append(f"suite exited {done.returncode}")
    return outcome


def prepare(folder: Path) -> tuple[dict[str, str], Any]:
    """A migrated database template and an embedded Redis for the clients."""
    env = {**os.environ, "TESSERA_VAR_DIR": str(folder), "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    socket = folder / "redis" / "redis.sock"
    sys.path.insert(0, str(ROOT))
    from core import embedded_redis

    redis = embedded_redis.start(socket)
    env["REDIS_URL"] = f"unix://{socket}"
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    env["TESSERA_CONFORMANCE_TEMPLATE"] = str(folder / "tessera.sqlite3")
    return env, redis


def report(kind: str, outcomes: list[Outcome], expected: dict[str, str]) -> int:
    problems: list[str] = []
    for outcome in outcomes:
        listed = outcome.scenario in expected
        mark = "ok" if outcome.ok else ("expected failure" if listed else "FAILED")
        print(
            f"{kind} {outcome.scenario}: {outcome.passed} passed, {outcome.failed} failed, "
            f"{outcome.warnings} warnings ({outcome.verdict}) — {mark}"
        )
        for failure in outcome.failures[:5]:
            print(f"    {failure}")
        if not outcome.ok and not listed:
            problems.append(f"{outcome.scenario} failed")
            print(outcome.output[-3000:])
        if outcome.ok and listed:
            problems.append(f"{outcome.scenario} passes: remove it from {EXPECTED.name}")
    total = sum(o.passed for o in outcomes)
    if total == 0:
        problems.append("no check ran")
    print(f"{kind}: {total} checks passed in {len(outcomes)} scenarios")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", help="client scenarios to run (default: all)")
    parser.add_argument(
        "--spec-version",
        choices=REVISIONS,
        default="",
        help="run the newest line's scenarios this protocol revision requires, at its wire",
    )
    args = parser.parse_args()
    revision = args.spec_version
    names = args.scenarios or scenarios("Client", revision)
    expected = expected_failures("client", revision)
    kind = f"client@{revision}" if revision else "client"
    base = ROOT / "var" / "conformance"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="client-", dir=base) as work:
        folder = Path(work)
        env, redis = prepare(folder)
        try:
            outcomes = [run_client(name, env, folder / "results", revision) for name in names]
        finally:
            from core import embedded_redis

            embedded_redis.stop(redis)
    return report(kind, outcomes, {k: v for k, v in expected.items() if k in names})


if __name__ == "__main__":
    sys.exit(main())
