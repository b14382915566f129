"""`manage.py buildstatic`: the minified files (`npm run build`, frontend/build.mjs), then
collectstatic, unless STATIC_ROOT already holds what the current sources make. `make run`,
`make test`, the test setup and the Lighthouse run use it; a deployment runs it where it would
run collectstatic.

Up to date means built from the same sources (static/, frontend/ with the build script and the
MCP card View, package-lock.json), by
the same Django (the admin's files) and WhiteNoise, with the same static settings: a hash of all
that is kept beside the manifest. collectstatic compresses every file again each time it runs
(about 10 s of CPU here, mostly Brotli on the admin's scripts), so it runs only after a change.

With DEBUG=true the sources are served as they are, and there is nothing to build.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
from importlib.metadata import version
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

KEY_FILE = ".sources.sha256"


def sources_key() -> str:
    """A hash of everything the built and collected files are made from."""
    base = Path(settings.BASE_DIR)
    digest = hashlib.sha256()
    for part in (
        version("django"),
        version("whitenoise"),
        settings.STATIC_URL,
        repr(settings.STORAGES["staticfiles"]),
        repr(settings.STATICFILES_DIRS),
    ):
        digest.update(part.encode() + b"\0")
    files = [*sorted((base / "static").rglob("*")), *sorted((base / "frontend").rglob("*")), base / "package-lock.json"]
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(base)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Build the minified static files and collect them (hashed and compressed), if anything changed."
    # The checks would only say that the files are not built yet.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--force", action="store_true", help="Build and collect even if nothing changed.")

    def handle(self, *args: Any, **options: Any) -> None:
        if settings.DEBUG:
            self.stdout.write("DEBUG is on: the static files are served from their sources; nothing to build.")
            return
        root = Path(settings.STATIC_ROOT)
        root.mkdir(parents=True, exist_ok=True)
        # Two runs at once (a test run beside `make run`) build one after the other.
        with open(root / ".build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            key = sources_key()
            stored = root / KEY_FILE
            built = stored.exists() and stored.read_text() == key and (root / "staticfiles.json").exists()
            if built and not options["force"]:
                if options["verbosity"] >= 2:
                    self.stdout.write("Static files are up to date.")
                return
            self._build()
            call_command("collectstatic", interactive=False, verbosity=0)
            stored.write_text(key)
            self.stdout.write(f"Static files built and collected in {root}.")

    def _build(self) -> None:
        npm = shutil.which("npm")
        if npm is None:
            raise CommandError("npm is needed to build the static files (the README lists what to install).")
        done = subprocess.run(
            [npm, "run", "--silent", "build"], cwd=settings.BASE_DIR, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise CommandError(f"`npm run build` failed:\n{done.stdout}{done.stderr}")
