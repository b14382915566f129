"""deploy/nginx.conf is a tested example: its limits are the web processes' own, and the same
file (TLS taken out, its upstream pointed at the test's web process) serves pages and chat
sockets through a real nginx, refusing an oversized body before it reaches Tessera."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from django.conf import settings
from django.test import Client

from chat.models import Chat
from tests.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
MB = 1024 * 1024


def _size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", value.lower()).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "k": 1024, "m": MB, "g": 1024 * MB}[unit]


def test_the_example_sets_the_web_processes_body_limits() -> None:
    text = EXAMPLE.read_text()
    server_level = re.search(r"server \{.*?client_max_body_size (\w+);", text, re.S)
    upload = re.search(r"location = /files/ \{[^}]*client_max_body_size (\w+);", text, re.S)
    assert server_level and upload
    assert _size(server_level.group(1)) == settings.MAX_REQUEST_BODY_BYTES
    assert _size(upload.group(1)) == settings.MAX_UPLOAD_BODY_BYTES
    assert set(settings.UPLOAD_PATHS) == {"/files/"}


@pytest.fixture
def proxy(stack: Any, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    upstream = stack.url.removeprefix("http://")
    site = EXAMPLE.read_text()
    site = re.sub(r"upstream tessera \{.*?\}", f"upstream tessera {{ server {upstream}; }}", site, flags=re.S)
    site = site.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{port};")
    site = re.sub(r"\n\s*ssl_certificate\S* [^;]+;", "", site)
    for folder in ("logs", "tmp"):
        (tmp_path / folder).mkdir()
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/logs/error.log;\nevents {{}}\n"
        f"http {{\n access_log off;\n client_body_temp_path {tmp_path}/tmp;\n{site}\n}}\n"
    )
    command = [NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-g", "daemon off;"]
    checked = subprocess.run([*command[:5], "-t"], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_pages_and_chat_sockets_work_through_the_example(proxy: str, user: Any) -> None:
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    chat = Chat.objects.create(owner=user)

    page = httpx.get(f"{proxy}/chats/{chat.pk}/", headers={"Cookie": cookie})
    assert page.status_code == 200 and 'class="composer"' in page.text

    async def connect() -> bool:
        socket_url = proxy.replace("http://", "ws://") + f"/ws/chats/{chat.pk}/"
        async with websockets.connect(socket_url, additional_headers={"Cookie": cookie, "Origin": proxy}) as ws:
            await ws.ping()
            return True

    assert asyncio.run(connect())


@pytest.mark.integration
def test_an_oversized_body_stops_at_the_proxy(proxy: str) -> None:
    response = httpx.post(f"{proxy}/chats/new/", content=b"x" * (settings.MAX_REQUEST_BODY_BYTES + 1))
    assert response.status_code == 413 and "nginx" in response.text
