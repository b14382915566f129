"""`make test-pgvector`: the knowledge tests against a PostgreSQL server that has pgvector.

Debian's PostgreSQL here has no pgvector, and its package is not in the mirrors this project
installs from; PyPI's `pgserver` ships PostgreSQL 16 with pgvector, and this starts one for the
run (data under var/pgvector, a Unix socket, stopped when the run ends). pytest-django makes its
test database there, migration 0006 enables pgvector, and the knowledge tests take the path a
production server with pgvector takes (knowledge/pgvector.py). CI runs it (.ci/run).

    python -m tests.knowledge.pgvector_server [pytest arguments]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

ROOT = Path(__file__).resolve().parents[2]
TESTS = ["tests/knowledge/test_vectors.py", "tests/knowledge/test_lexical.py"]


def main() -> int:
    import pgserver

    data = ROOT / "var" / "pgvector"
    data.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(data, cleanup_mode="stop")
    # pgserver's URI names its socket's folder as a `host` parameter; Django's URL parser takes
    # it as the host, percent-encoded.
    socket_dir = parse_qs(urlsplit(server.get_uri()).query)["host"][0]
    url = f"postgres://postgres@{quote(socket_dir, safe='')}/postgres"
    env = {**os.environ, "DATABASE_URL": url}
    print(f"PostgreSQL with pgvector at {socket_dir}", flush=True)
    args = sys.argv[1:] or ["-q"]
    return subprocess.call([sys.executable, "-m", "pytest", *TESTS, *args], env=env, cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
