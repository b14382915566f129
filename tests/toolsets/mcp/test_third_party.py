"""Tessera's MCP client with real third-party servers from the registries, as an admin adds them:
PyPI `mcp-server-time` and `mcp-server-git` over stdio (in a venv of their own, .cache/mcp-servers,
pinned in third-party-servers.txt), and npm `@modelcontextprotocol/server-everything` (the
protocol's own feature showcase, pinned in package.json) over stdio, Streamable HTTP and SSE.
Discovery, calls, errors, images and progress go through the executor, as a turn's do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from toolsets.executor import execute

from .conftest import free_port, register

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
SERVERS_VENV = ROOT / ".cache" / "mcp-servers"
PINS = Path(__file__).with_name("third-party-servers.txt")
NODE = ROOT / "node_modules" / ".bin" / "node"
EVERYTHING = ROOT / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


@pytest.fixture(scope="session")
def servers_venv() -> Path:
    """The PyPI servers' own venv, made once (`make conformance` makes it too)."""
    stamp = SERVERS_VENV / ".installed"
    if not stamp.exists() or stamp.read_text() != PINS.read_text():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(SERVERS_VENV)], check=True)
        pip = [str(SERVERS_VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(PINS)], check=True, timeout=600)
        stamp.write_text(PINS.read_text())
    return SERVERS_VENV / "bin"


async def _call(user: Any, name: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
    return await execute(name, arguments, user_id=user.pk, tool_call_id=f"c-{name}", pre_approved=True, **kwargs)


def _text(result: dict[str, Any]) -> str:
    return "\n".join(block.get("text", "") for block in result["content"] if block.get("type") == "text")


async def test_mcp_server_time_over_stdio(transactional_db: Any, user: Any, servers_venv: Path) -> None:
    server = await sync_to_async(register)(
        name="Time", slug="time", transport="stdio", command=str(servers_venv / "mcp-server-time"), args=[]
    )
    assert server.server_name == "mcp-time"
    assert {"get_current_time", "convert_time"} <= {tool["name"] for tool in server.tools}
    done = await _call(user, "toolset__mcp_time__get_current_time", {"timezone": "Europe/Paris"})
    assert done.ok, done.error
    assert '"timezone": "Europe/Paris"' in _text(done.result)
    converted = await _call(
        user,
        "toolset__mcp_time__convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
    )
    assert converted.ok and "21:00" in _text(converted.result)
    # The server's own error, as the model sees it: a failed call, not a crash.
    wrong = await _call(user, "toolset__mcp_time__get_current_time", {"timezone": "Mars/Olympus_Mons"})
    assert not wrong.ok and wrong.error is not None
    assert "Mars/Olympus_Mons" in wrong.error.message


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit and an unstaged change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=Ada", "-c", "user.email=ada@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "notes.txt").write_text("first line\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "Add the notes"], check=True)
    (repo / "notes.txt").write_text("first line\nsecond line\n")
    return repo


async def test_mcp_server_git_over_stdio(
    transactional_db: Any, user: Any, servers_venv: Path, repo: Path, tmp_path: Path
) -> None:
    server = await sync_to_async(register)(
        name="Git",
        slug="git",
        transport="stdio",
        command=str(servers_venv / "mcp-server-git"),
        args=["--repository", str(repo)],
    )
    assert {"git_status", "git_log", "git_diff_unstaged"} <= {tool["name"] for tool in server.tools}
    log = await _call(user, "toolset__mcp_git__git_log", {"repo_path": str(repo)})
    assert log.ok, log.error
    assert "Add the notes" in _text(log.result)
    diff = await _call(user, "toolset__mcp_git__git_diff_unstaged", {"repo_path": str(repo)})
    assert diff.ok and "+second line" in _text(diff.result)
    # A path outside the repository it was given is the server's error, reported as one.
    outside = await _call(user, "toolset__mcp_git__git_status", {"repo_path": str(tmp_path)})
    assert not outside.ok and outside.error is not None


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server-everything did not listen on {port}")


@pytest.fixture
def everything_http(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """server-everything over one HTTP transport (the test's parameter): (transport, URL)."""
    mode = request.param
    port = free_port()
    process = subprocess.Popen(
        [str(NODE), str(EVERYTHING), mode],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        if mode == "sse":
            yield "sse", f"http://127.0.0.1:{port}/sse"
        else:
            yield "http", f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def _exercise_everything(user: Any, slug: str) -> None:
    name = f"toolset__mcp_{slug}__"
    echoed = await _call(user, name + "echo", {"message": "Hello <b>there</b>"})
    assert echoed.ok, echoed.error
    assert "Hello <b>there</b>" in _text(echoed.result)
    total = await _call(user, name + "get-sum", {"a": 2, "b": 40})
    assert total.ok and "42" in _text(total.result)
    image = await _call(user, name + "get-tiny-image", {})
    assert image.ok, image.error
    assert any(block.get("type") == "image" for block in image.result["content"])
    steps: list[tuple[str, float | None]] = []
    progress = await _call(
        user,
        name + "trigger-long-running-operation",
        {"duration": 1, "steps": 3},
        progress=lambda text, percent=None: steps.append((text, percent)),
    )
    assert progress.ok, progress.error
    assert any(percent is not None for _, percent in steps), steps
    # Arguments the tool's schema refuses: Tessera's validation, before the server is asked.
    wrong = await _call(user, name + "get-sum", {"a": "two"})
    assert not wrong.ok and wrong.error is not None and wrong.error.type == "validation_error"


async def test_server_everything_over_stdio(transactional_db: Any, user: Any) -> None:
    server = await sync_to_async(register)(
        name="Everything", slug="every", transport="stdio", command=str(NODE), args=[str(EVERYTHING), "stdio"]
    )
    assert {"echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"} <= {t["name"] for t in server.tools}
    await _exercise_everything(user, "every")


@pytest.mark.parametrize("everything_http", ["streamableHttp", "sse"], indirect=True)
async def test_server_everything_over_http(transactional_db: Any, user: Any, everything_http: tuple[str, str]) -> None:
    transport, url = everything_http
    server = await sync_to_async(register)(name="Everything", slug="everyhttp", transport=transport, url=url)
    assert server.protocol_version, server.refresh_message
    await _exercise_everything(user, "everyhttp")
