"""Code trying to get out of its sandbox: each attempt is refused or bounded, with a clear result,
and the session goes on (or, for what kills it, the next one starts cleanly). Real bubblewrap,
the real kernel and the sandbox's own Python; skipped where the machine lacks them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from sandbox import jail
from sandbox.session import Outcome, Session

pytestmark = pytest.mark.skipif(bool(jail.missing()), reason=jail.missing() or "ok")

LIMITS = jail.Limits(
    cpu_s=4, wall_s=8, memory_mb=1024, processes=24, disk_mb=20, output_chars=10_000, files_mb=5, max_files=5
)


class Runner:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.session = Session(1, data, LIMITS)
        self.stdout = ""
        self.stderr = ""

    def __call__(self, code: str) -> Outcome:
        self.stdout = self.stderr = ""

        def output(stream: str, text: str) -> None:
            if stream == "stdout":
                self.stdout += text
            else:
                self.stderr += text

        outcome = self.session.run(code, output, lambda: False)
        if outcome.ended:
            assert not self.session.alive
            self.session = Session(1, self.data, LIMITS)
        return outcome


@pytest.fixture(scope="module")
def other_chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("other-chat")
    (folder / "secret.txt").write_text("another chat's secret")
    folder.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    data = tmp_path_factory.mktemp("chat-data")
    (data / "mine.csv").write_text("a,b\n1,2\n")
    for folder in (data, *data.parents):
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o005)
    runner = Runner(data)
    yield runner
    runner.session.close()


def test_state_lives_between_calls_and_the_chats_files_are_readable(run: Runner) -> None:
    assert run("x = 41").ok
    assert run("print(x + 1); print(open('/data/mine.csv').read())").ok
    assert run.stdout == "42\na,b\n1,2\n\n"


def test_a_last_expression_is_printed_and_an_error_is_a_result(run: Runner) -> None:
    assert run("1 + 1").ok and run.stdout == "2\n"
    outcome = run("1 / 0")
    assert not outcome.ok and outcome.error == "ZeroDivisionError: division by zero"
    # The user's own frames, with their lines; none of the kernel's.
    assert run.stderr.startswith('Traceback (most recent call last):\n  File "<code>", line 1, in <module>\n    1 / 0')
    assert run.stderr.endswith("ZeroDivisionError: division by zero\n") and "kernel" not in run.stderr
    assert not outcome.ended


def test_host_files_settings_database_and_secrets_are_not_there(run: Runner) -> None:
    paths = [
        "/etc/shadow",
        "/etc/passwd",
        str(settings.BASE_DIR / "config" / "settings.py"),
        str(settings.BASE_DIR / ".env"),
        str(Path(settings.VAR_DIR) / "db.sqlite3"),
        "/root/.bash_history",
        "/home",
        "/var",
    ]
    code = f"import os\nfor p in {paths!r}:\n    print(p, os.path.exists(p))"
    assert run(code).ok
    assert run.stdout.count(" False") == len(paths), run.stdout
    assert run("import os; print(sorted(os.environ))").ok
    assert "SECRET_KEY" not in run.stdout and "REDIS" not in run.stdout and "DJANGO" not in run.stdout


def test_proc_shows_only_the_sandbox(run: Runner) -> None:
    code = (
        "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\nprint(len(pids))\n"
        "leaks = []\nfor p in pids:\n    try:\n        env = open(f'/proc/{p}/environ', 'rb').read()\n"
        "    except OSError:\n        continue\n    if b'SECRET' in env or b'REDIS' in env:\n        leaks.append(p)\n"
        "print(leaks, os.getuid())"
    )
    assert run(code).ok
    count, rest = run.stdout.split("\n", 1)
    assert int(count) < 6 and rest.strip() == "[] 1000"


def test_the_redis_socket_and_the_network_are_unreachable(run: Runner) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        code = (
            "import socket\n"
            f"for target in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('example.com', 80)]:\n"
            "    try:\n        socket.create_connection(target, timeout=2)\n        print('connected', target)\n"
            "    except OSError as exc:\n        print('refused', type(exc).__name__)\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            f"try:\n    s.connect({str(settings.EMBEDDED_REDIS_SOCKET)!r})\n    print('redis connected')\n"
            "except OSError as exc:\n    print('redis refused', type(exc).__name__)"
        )
        assert run(code).ok
    finally:
        listener.close()
    assert "connected" not in run.stdout.replace("refused", ""), run.stdout
    assert run.stdout.count("refused") == 4


def test_another_chats_folder_and_writes_outside_output_are_refused(run: Runner, other_chat: Path) -> None:
    code = (
        "import os\n"
        f"print(os.path.exists({str(other_chat / 'secret.txt')!r}), os.listdir('/data'))\n"
        "for path in ['/data/new.txt', '/usr/evil', '/output/../usr/evil', '/opt/kernel.py']:\n"
        "    try:\n        open(path, 'w').write('x')\n        print('wrote', path)\n"
        "    except OSError as exc:\n        print('refused', exc.errno)\n"
        "os.symlink('/etc/fonts/fonts.conf', '/output/link.conf')\n"
        f"os.symlink({str(other_chat / 'secret.txt')!r}, '/output/secret.txt')\n"
        "open('/output/real.txt', 'w').write('made here')"
    )
    outcome = run(code)
    assert outcome.ok, run.stderr
    assert run.stdout.startswith("False ['mine.csv']")
    assert "wrote" not in run.stdout and run.stdout.count("refused") == 4
    # Links are not files: only what the code wrote comes back.
    assert outcome.files == [("real.txt", b"made here")]
    assert not (Path(run.data) / "new.txt").exists()


def test_namespaces_cannot_be_made_inside(run: Runner) -> None:
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())"
    )
    assert run(code).ok
    assert run.stdout.split()[0] == "-1"


def test_a_fork_bomb_is_bounded(run: Runner) -> None:
    code = (
        "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
        "            time.sleep(3)\n            os._exit(0)\n        n += 1\n"
        "except OSError as exc:\n    print('refused after', n, type(exc).__name__)"
    )
    outcome = run(code)
    assert outcome.ok and run.stdout.startswith("refused after"), run.stdout + run.stderr
    assert int(run.stdout.split()[2]) < LIMITS.processes
    assert run("print('still here')").ok and run.stdout == "still here\n"


def test_ten_gigabytes_of_memory_are_refused(run: Runner) -> None:
    outcome = run("block = bytearray(10 * 1024**3)")
    assert not outcome.ok and outcome.error == "MemoryError" and not outcome.ended
    assert run("print('still here')").ok


def test_writing_ten_gigabytes_stops_at_the_disk_limit(run: Runner) -> None:
    code = (
        "chunk = b'x' * 1024 * 1024\nwritten = 0\ntry:\n    with open('/tmp/big', 'wb') as f:\n"
        "        for _ in range(10 * 1024):\n            f.write(chunk)\n            written += 1\n"
        "except OSError as exc:\n    print('stopped at', written, 'MB', exc.errno)\n"
        "import os\nos.remove('/tmp/big')\n"
        "try:\n    with open('/output/big', 'wb') as f:\n"
        "        for _ in range(10 * 1024):\n            f.write(chunk)\n"
        "except OSError as exc:\n    print('output full', exc.errno)"
    )
    outcome = run(code)
    assert outcome.ok, run.stderr
    assert run.stdout.startswith("stopped at") and int(run.stdout.split()[2]) <= 64
    assert "output full" in run.stdout
    # The file that filled /output is larger than a call brings back: named, not kept.
    assert outcome.files == [] and outcome.skipped[0]["name"] == "big"
    assert run("import os; os.remove('/output/big'); print('ok')").ok


def test_a_hundred_megabytes_of_output_are_cut(run: Runner) -> None:
    outcome = run("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 1024 * 1024)\nprint('done')")
    assert outcome.ok and not outcome.ended
    assert len(run.stdout) < LIMITS.output_chars + 200
    assert "Output limit reached" in run.stdout
    assert run("print('still here')").ok and run.stdout == "still here\n"


def test_an_infinite_loop_is_stopped_and_the_next_call_starts_a_new_session(run: Runner) -> None:
    run("kept = 1")
    outcome = run("while True:\n    pass")
    assert not outcome.ok and ("CPU time" in outcome.ended or "longer than" in outcome.ended)
    assert run("print('kept' in globals())").ok and run.stdout == "False\n"


def test_a_sleeping_loop_is_stopped_at_the_wall_limit(run: Runner) -> None:
    outcome = run("import time\nwhile True:\n    time.sleep(1)")
    assert f"longer than {LIMITS.wall_s} seconds" in outcome.ended
    assert run("print('fresh')").ok


def test_figures_come_back_as_pictures(run: Runner) -> None:
    outcome = run("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()")
    assert outcome.ok, run.stderr
    assert len(outcome.figures) == 1 and run.stderr == ""
    import base64

    assert base64.b64decode(outcome.figures[0]).startswith(b"\x89PNG")
