"""A lock file per output folder, so that two processes never write into the same folder.

Every command that writes a folder (``gsd simulate`` and each run of a sweep, ``gsd diagnose
--out``, ``gsd reproduce``) holds the lock ``<folder>.lock``, beside the folder, for as long as
it writes there (:func:`hold_folder`); a second process gets a one-line error naming the owner.
:func:`hold_folder` is re-entrant within a process: a sweep worker holds a run's lock and the
simulator it calls holds the same folder again without waiting for itself (a bare
:class:`RunLock` is not: two of them exclude each other even in one process).

The lock is a file created with ``O_CREAT | O_EXCL`` (atomic on local file systems and on
NFSv3+), holding JSON that names its owner: host, pid, the process start time (to tell a
recycled pid from the owner) and a random token.  While held, a background thread touches the
file every ``heartbeat`` seconds.

A lock is *stale*, and may be broken, when

* its owner ran on this host and that process is gone (or the pid now belongs to a process
  that started later);
* its owner ran on another host and the file has not been touched for ``stale_after``
  seconds (the owner's heartbeat stopped);
* it cannot be read as a lock (its writer died between creating and filling it) and is older
  than ``grace`` seconds.

Breaking is itself serialised by a short-lived ``<lock>.break`` file, and the breaker checks,
holding it, that the lock is still the stale one it saw; so two processes that find the same
stale lock cannot both take it, and a fresh lock is never removed by mistake.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path

__all__ = ["RunLock", "LockBusy", "read_lock", "lock_is_stale", "lock_path", "hold_folder"]

# Locks this process holds: resolved lock path -> (pid, the RunLock).  The pid guards against a
# forked child, which inherits the dict but not the ownership.
_HELD: dict = {}


class LockBusy(RuntimeError):
    """The lock is held by a live owner (raised when the wait times out)."""

    def __init__(self, message: str, owner: str = "an unknown owner"):
        super().__init__(message)
        self.owner = owner


def lock_path(folder) -> Path:
    """The lock file of a folder: ``<folder>.lock``, beside it (``.`` and ``..`` resolved first,
    so the lock of the working folder lies beside it, not inside)."""
    folder = Path(os.path.abspath(folder))
    return folder.parent / (folder.name + ".lock")


def _process_start(pid: int) -> str | None:
    """The start time of a process in clock ticks since boot (Linux), else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def read_lock(path) -> tuple[dict | None, bytes | None]:
    """(owner info or None if unreadable, raw bytes or None if the file is missing)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError:
        return None, b""
    try:
        info = json.loads(raw.decode("utf-8"))
        if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
            info = None
    except (UnicodeDecodeError, json.JSONDecodeError):
        info = None
    return info, raw


def lock_is_stale(path, info: dict | None, *, stale_after: float = 600.0, grace: float = 10.0) -> bool:
    """Whether the lock at ``path`` (whose content parsed to ``info``) may be broken."""
    try:
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return False  # gone already: nothing to break
    if info is None:
        return age > grace
    if info.get("host") == socket.gethostname():
        pid = info["pid"]
        if not _pid_alive(pid):
            return True
        started = info.get("start")
        now_started = _process_start(pid)
        return started is not None and now_started is not None and started != now_started
    return age > stale_after


class RunLock:
    """An exclusive lock on one run folder (a context manager).

    ``timeout=None`` waits as long as a live owner holds the lock; a number waits at most
    that many seconds and then raises :class:`LockBusy` (0: try once).
    """

    def __init__(self, path, *, timeout: float | None = None, poll: float = 0.5,
                 stale_after: float = 600.0, grace: float = 10.0, heartbeat: float = 30.0):
        self.path = Path(path)
        self.timeout = timeout
        self.poll = poll
        self.stale_after = stale_after
        self.grace = grace
        self.heartbeat = heartbeat
        self.token: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- acquire / release
    def acquire(self) -> "RunLock":
        if self.token is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        key = _key(self.path)
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            token = uuid.uuid4().hex
            if self._try_create(token):
                self.token = token
                _HELD[key] = (os.getpid(), self)
                self._start_heartbeat()
                return self
            info, raw = read_lock(self.path)
            if raw is None:
                continue  # released between our attempt and the read
            if lock_is_stale(self.path, info, stale_after=self.stale_after, grace=self.grace):
                self._break(raw)
                continue
            if deadline is not None and time.monotonic() >= deadline:
                owner = f"pid {info['pid']} on {info.get('host')}" if info else "an unknown owner"
                raise LockBusy(f"run folder is locked by {owner} ({self.path})", owner)
            time.sleep(self.poll)

    def _try_create(self, token: str) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            info = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "start": _process_start(os.getpid()),
                "token": token,
                "created": time.time(),
            }
            os.write(fd, json.dumps(info).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return True

    def _break(self, seen: bytes) -> None:
        """Remove the stale lock whose content was ``seen``, if it is still that one."""
        breaker = Path(str(self.path) + ".break")
        try:
            fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:  # a breaker that died mid-way leaves its file behind
                if time.time() - os.stat(breaker).st_mtime > max(self.grace, 5.0):
                    breaker.unlink(missing_ok=True)
            except FileNotFoundError:
                pass
            time.sleep(min(self.poll, 0.05))
            return
        try:
            info, raw = read_lock(self.path)
            if raw == seen and lock_is_stale(self.path, info, stale_after=self.stale_after, grace=self.grace):
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)
            breaker.unlink(missing_ok=True)

    def release(self) -> None:
        if self.token is None:
            return
        if _HELD.get(_key(self.path), (None, None))[1] is self:
            del _HELD[_key(self.path)]
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        info, _ = read_lock(self.path)
        if info is not None and info.get("token") == self.token:
            self.path.unlink(missing_ok=True)
        self.token = None
        self._thread = None
        self._stop = threading.Event()

    @property
    def held(self) -> bool:
        return self.token is not None

    # -- heartbeat
    def _start_heartbeat(self) -> None:
        if not self.heartbeat or self.heartbeat <= 0:
            return
        stop, path = self._stop, self.path

        def beat():
            while not stop.wait(self.heartbeat):
                try:
                    os.utime(path)
                except OSError:
                    pass

        self._thread = threading.Thread(target=beat, name=f"lock-heartbeat:{path.name}", daemon=True)
        self._thread.start()

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _key(path: Path) -> str:
    return os.path.realpath(path)


class hold_folder:
    """Hold the lock of ``folder`` (:func:`lock_path`) while the block runs; a context manager.

    Another live process holding it is the user's input error (two commands on one folder):
    :class:`gsd.InputError` naming the folder and the owner's pid and host, at once
    (``timeout=0``) or after ``timeout`` seconds.  ``option`` names the argument in the message.
    """

    def __init__(self, folder, *, option: str = "out", timeout: float | None = 0):
        self.folder = Path(folder)
        self.option = option
        self.lock = RunLock(lock_path(self.folder), timeout=timeout)
        self.borrowed = False

    def __enter__(self) -> "hold_folder":
        from ._errors import InputError  # here: the module itself stays loadable on its own

        holder = _HELD.get(_key(self.lock.path))
        if holder is not None and holder[0] == os.getpid() and holder[1].held:
            self.borrowed = True  # this process holds it already (a sweep worker's run)
            return self
        try:
            self.lock.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{self.option} {str(self.folder)!r}: cannot create its parent folder "
                             f"({exc.strerror or exc})") from None
        try:
            self.lock.acquire()
        except LockBusy as exc:
            raise InputError(f"{self.option} {str(self.folder)!r} is in use by {exc.owner} (lock file "
                             f"{str(self.lock.path)!r}); wait for it to finish, or use another folder") from None
        except OSError as exc:
            raise InputError(f"{self.option} {str(self.folder)!r}: cannot create its lock file "
                             f"{str(self.lock.path)!r} ({exc.strerror or exc})") from None
        return self

    def __exit__(self, *exc) -> None:
        if self.borrowed:
            self.borrowed = False
        else:
            self.lock.release()
