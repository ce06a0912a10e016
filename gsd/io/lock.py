"""A lock per output folder, so that two processes never write into the same folder.

Every command that writes a folder (``gsd simulate`` and each run of a sweep, ``gsd diagnose
--out``, ``gsd reproduce``) holds the lock ``<folder>.lock``, beside the folder, for as long as
it writes there (:func:`hold_folder`); a second process gets a one-line error naming the owner.
:func:`hold_folder` is re-entrant within a process: a sweep worker holds a run's lock and the
simulator it calls holds the same folder again without waiting for itself (a bare
:class:`RunLock` is not: two of them exclude each other even in one process).

The lock is the kernel's: an exclusive :func:`fcntl.flock` on the open lock file.  The kernel
drops it when its holder's process ends, however it ends (SIGKILL, a crash, a node's reboot),
so there is no pid file to judge: no stale lock to break, no recycled or huge pid to parse, no
clock to trust.  The file holds JSON naming its owner (host, pid, a random token) for the
message a second process prints; nothing reads it to decide.  Release removes the file while
still holding the lock; an acquirer checks, once it holds the lock, that the path still names the
file it locked (else it locked a removed file and tries again), so two processes never both
hold a folder.  A lock file a killed process left behind holds no lock: the next command takes
it at once and removes it when done (:func:`clear_unheld`, for a sweep's folders).  On NFS,
Linux implements ``flock`` with the server's byte-range locks (NFSv4, or v3 with lockd).

The lock path must be a regular file or absent: a symbolic link (dangling or not), a FIFO, a
folder or a device there is refused at once in one line (opening a FIFO would wait for a writer
for ever; following a link would lock, and later remove, a file elsewhere).

Only the standard library is imported here (POSIX).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
import uuid
from pathlib import Path

__all__ = ["RunLock", "LockBusy", "read_lock", "lock_path", "hold_folder", "clear_unheld"]

# Locks this process holds: resolved lock path -> (pid, the RunLock).  The pid guards against a
# forked child, which inherits the dict but not the ownership.
_HELD: dict = {}
#: Bytes of the owner note read back for a message at most (a lock file is a few dozen).
_NOTE_BYTES = 4096


class LockBusy(RuntimeError):
    """The lock is held by a live owner (raised when the wait times out)."""

    def __init__(self, message: str, owner: str = "an unknown owner"):
        super().__init__(message)
        self.owner = owner


def _input_error(message: str) -> Exception:
    try:
        from ..errors import InputError
    except ImportError:  # loaded on its own, outside the package (a cheap contender process)
        return ValueError(message)
    return InputError(message)


def lock_path(folder) -> Path:
    """The lock file of a folder: ``<folder>.lock``, beside it (``.`` and ``..`` resolved first,
    so the lock of the working folder lies beside it, not inside)."""
    folder = Path(os.path.abspath(folder))
    return folder.parent / (folder.name + ".lock")


def read_lock(path) -> tuple[dict | None, bytes | None]:
    """(owner note or None if unreadable, raw bytes or None if the file is missing).

    Reads a regular file only (a FIFO or a link there reads as unreadable, without waiting)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError:
        return None, b""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, b""
        raw = os.read(fd, _NOTE_BYTES)
    except OSError:
        return None, b""
    finally:
        os.close(fd)
    try:
        info = json.loads(raw.decode("utf-8"))
        if not isinstance(info, dict):
            info = None
    except (UnicodeDecodeError, ValueError):
        info = None
    return info, raw


def _owner(info: dict | None) -> str:
    if not info:
        return "an unknown owner"
    pid, host = info.get("pid"), info.get("host")
    return f"pid {str(pid)[:24]} on {str(host)[:64]}"


class RunLock:
    """An exclusive lock on one run folder (a context manager).

    ``timeout=None`` waits as long as another process holds the lock; a number waits at most
    that many seconds (polling every ``poll``) and then raises :class:`LockBusy` (0: try once).
    A lock path that is not a regular file raises :class:`ValueError` (:class:`gsd.InputError`).
    """

    def __init__(self, path, *, timeout: float | None = None, poll: float = 0.2):
        self.path = Path(path)
        self.timeout = timeout
        self.poll = poll
        self.token: str | None = None
        self._fd: int | None = None

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            try:
                fd = os.open(self.path, flags, 0o644)
            except OSError as exc:
                if exc.errno != errno.EMFILE or not _raise_file_limit():
                    raise
                fd = os.open(self.path, flags, 0o644)  # a program of many runs holds one descriptor per run
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _input_error(
                    f"lock file {str(self.path)!r} is a symbolic link, not a lock file; remove it "
                    "(gsd never follows a link to lock or remove a file elsewhere)"
                ) from None
            if exc.errno in (errno.EISDIR, errno.ENXIO):
                raise _input_error(
                    f"lock file {str(self.path)!r} is not a regular file ({exc.strerror}); remove it"
                ) from None
            raise
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            kind = (
                "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device or special file"
            )
            raise _input_error(f"lock file {str(self.path)!r} is {kind}, not a regular file; remove it")
        return fd

    def _same_file(self, fd: int) -> bool:
        """Whether the path still names the file ``fd`` holds (a releaser may have removed it)."""
        try:
            now = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)

    # -- acquire / release
    def acquire(self) -> "RunLock":
        if self.token is not None:
            raise RuntimeError(f"lock {self.path} is already held by this object")
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if deadline is not None and time.monotonic() >= deadline:
                    owner = _owner(read_lock(self.path)[0])
                    raise LockBusy(f"{self.path} is held by {owner}", owner) from None
                time.sleep(self.poll if deadline is None else max(0.0, min(self.poll, deadline - time.monotonic())))
                continue
            except BaseException:
                os.close(fd)
                raise
            if not self._same_file(fd):  # locked a file its releaser had just removed
                os.close(fd)
                continue
            token = uuid.uuid4().hex
            note = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "token": token}).encode()
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, note, 0)
            except OSError:
                pass  # the note only names the owner in messages; the lock is the flock
            self._fd, self.token = fd, token
            _HELD[_key(self.path)] = (os.getpid(), self)
            return self

    def release(self) -> None:
        if self.token is None:
            return
        if _HELD.get(_key(self.path), (None, None))[1] is self:
            del _HELD[_key(self.path)]
        fd, self._fd, self.token = self._fd, None, None
        assert fd is not None  # held: a token and its descriptor are set together
        try:
            if self._same_file(fd):  # removed while held: no other process can be holding it
                self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # drops the flock

    @property
    def held(self) -> bool:
        return self.token is not None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _raise_file_limit() -> bool:
    """Raise this process's soft limit of open files to its hard limit (a lock is an open file, and
    a program of runs holds one per run); whether it rose."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard  # Linux caps it at nr_open (2^20 by default)
    if soft >= target:
        return False
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return False
    return True


def _key(path: Path) -> str:
    return os.path.realpath(path)


def clear_unheld(paths) -> list[Path]:
    """Remove the lock files among ``paths`` that no process holds (a killed holder's); returns them.

    Each is taken without waiting and released, which removes it; a held one, or a path that is
    not a regular file, is left as it is."""
    removed = []
    for path in paths:
        path = Path(path)
        if not path.is_file() or path.is_symlink():
            continue
        try:
            RunLock(path, timeout=0).acquire().release()
        except (LockBusy, ValueError, OSError):
            continue
        removed.append(path)
    return removed


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
        from ..errors import InputError  # here: the module itself stays loadable on its own

        holder = _HELD.get(_key(self.lock.path))
        if holder is not None and holder[0] == os.getpid() and holder[1].held:
            self.borrowed = True  # this process holds it already (a sweep worker's run)
            return self
        try:
            self.lock.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"{self.option} {str(self.folder)!r}: cannot create its parent folder ({exc.strerror or exc})"
            ) from None
        try:
            self.lock.acquire()
        except LockBusy as exc:
            raise InputError(
                f"{self.option} {str(self.folder)!r} is in use by {exc.owner} (lock file "
                f"{str(self.lock.path)!r}); wait for it to finish, or use another folder"
            ) from None
        except InputError as exc:
            raise InputError(f"{self.option} {str(self.folder)!r}: {exc}") from None
        except OSError as exc:
            raise InputError(
                f"{self.option} {str(self.folder)!r}: cannot create its lock file "
                f"{str(self.lock.path)!r} ({exc.strerror or exc})"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        if self.borrowed:
            self.borrowed = False
        else:
            self.lock.release()
