"""The sessions one sandbox worker holds, by chat, and the chats' files laid out for them.

A session ends after SANDBOX_IDLE_S without a call (a thread looks every few seconds), when a
call breaks a limit that kills it, or with the worker. The next call of that chat starts a new
one and says why the old one is gone: the worker remembers the reason, and the caller says
whether the chat had a session before (its record lives in Redis, across workers).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files.storage import storages

from . import jail
from .session import Ended, Session

IDLE_CHECK_S = 5.0
REMEMBERED = 10_000

_lock = threading.Lock()
_sessions: dict[int, Session] = {}
# Why each chat's last session ended, for its next call (oldest forgotten first).
_ended: OrderedDict[int, str] = OrderedDict()
_reaper: threading.Thread | None = None


def _forget(chat_id: int, reason: str) -> None:
    _ended[chat_id] = reason
    _ended.move_to_end(chat_id)
    while len(_ended) > REMEMBERED:
        _ended.popitem(last=False)


def acquire(chat_id: int, data_dir: Path, had_session: bool) -> tuple[Session, str]:
    """The chat's live session, or a new one and the notice of why the earlier one is gone.
    The session comes locked: one call at a time per chat. Raises Ended if it cannot start."""
    _start_reaper()
    with _lock:
        session = _sessions.get(chat_id)
        if session is not None and not session.alive:
            _sessions.pop(chat_id, None)
            session = None
    if session is not None:
        session.lock.acquire()
        if session.alive:
            return session, ""
        session.lock.release()
    with _lock:
        reason = _ended.pop(chat_id, "")
    notice = ""
    if reason:
        notice = f"A new session started (the earlier one ended: {reason}). Variables from earlier calls are gone."
    elif had_session:
        notice = "A new session started (the earlier one ended): variables from earlier calls are gone."
    session = Session(chat_id, data_dir, jail.limits())
    session.lock.acquire()
    with _lock:
        old = _sessions.get(chat_id)
        _sessions[chat_id] = session
    if old is not None and old is not session:
        old.close()
    return session, notice


def release(session: Session, ended: str) -> None:
    if ended:
        with _lock:
            if _sessions.get(session.chat_id) is session:
                _sessions.pop(session.chat_id)
            # "Stopped; the session was restarted." → "Stopped": the next call's notice says the rest.
            _forget(session.chat_id, ended.split(";")[0].rstrip("."))
        session.close()
    session.lock.release()


def end(chat_id: int, reason: str) -> None:
    with _lock:
        session = _sessions.pop(chat_id, None)
        if session is not None:
            _forget(chat_id, reason)
    if session is not None:
        session.close()


def close_all() -> None:
    with _lock:
        sessions = list(_sessions.values())
        _sessions.clear()
    for session in sessions:
        session.close()


def reap_idle(now: float | None = None) -> list[int]:
    """Ends the sessions idle past SANDBOX_IDLE_S; the chats whose session ended."""
    idle_s = float(settings.SANDBOX_IDLE_S)
    now = time.monotonic() if now is None else now
    with _lock:
        stale = [s for s in _sessions.values() if now - s.last_used > idle_s and not s.lock.locked()]
    minutes = max(1, round(idle_s / 60))
    for session in stale:
        end(session.chat_id, f"no call for {minutes} minute{'' if minutes == 1 else 's'}")
    return [s.chat_id for s in stale]


def _start_reaper() -> None:
    global _reaper
    with _lock:
        if _reaper is not None and _reaper.is_alive():
            return
        _reaper = threading.Thread(target=_reap_forever, daemon=True, name="sandbox-reaper")
        _reaper.start()


def _reap_forever() -> None:
    while True:
        time.sleep(IDLE_CHECK_S)
        reap_idle()


def stage(chat_id: int, files: list[dict[str, Any]]) -> Path:
    """The chat's folder mounted at /data: its files (from the files storage), named as their
    owner named them; files no longer in the chat are removed. When the worker is root the
    folder belongs to the chat's sandbox user, readable by nobody else."""
    folder = Path(settings.SANDBOX_DIR) / f"chat-{chat_id}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    manifest_path = folder.parent / f"chat-{chat_id}.json"
    try:
        manifest: dict[str, str] = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    wanted: dict[str, str] = {}
    taken: set[str] = set()
    for item in files:
        name = _unique(_safe_name(str(item["name"])), taken)
        taken.add(name)
        wanted[str(item["id"])] = name
    ids = jail.host_ids(chat_id)
    for key, name in manifest.items():
        if wanted.get(key) != name:
            (folder / name).unlink(missing_ok=True)
    for item in files:
        key, name = str(item["id"]), wanted[str(item["id"])]
        target = folder / name
        if manifest.get(key) == name and target.exists():
            continue
        with storages["files"].open(str(item["path"]), "rb") as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out)
        os.chmod(target, 0o400)
        if ids:
            os.chown(target, *ids)
    os.chmod(folder, 0o500 if ids else 0o700)
    if ids:
        os.chown(folder, *ids)
    manifest_path.write_text(json.dumps(wanted))
    return folder


def _safe_name(name: str) -> str:
    name = os.path.basename(name.replace("\\", "/")).strip().lstrip(".")
    cleaned = "".join(ch for ch in name if ch.isprintable() and ch not in "/\x00")[:150]
    return cleaned or "file"


def _unique(name: str, taken: set[str]) -> str:
    stem, ext = os.path.splitext(name)
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem} ({n}){ext}"
    return candidate


__all__ = ["Ended", "acquire", "close_all", "end", "reap_idle", "release", "stage"]
