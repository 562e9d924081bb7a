"""One lock per cache key, so that of several processes compiling the same kernel at
once, one compiles and the others wait and read its entry.

The lock is an advisory ``flock`` on ``<cache_dir>/locks/<key[:2]>/<key>.lock``.

* **Processes killed while holding it** leave no stale lock: the operating system
  releases a ``flock`` when the file is closed, which includes every way a process dies
  (``kill -9`` too).  The lock files themselves stay (empty but for a line naming the
  last holder): removing one while another process waits on it would let a third take a
  lock on a new file, and two would compile.  ``KernelCache.clear()`` removes them.
* **A holder that does not finish** (a compile stopped in a debugger, or a lock lost on a
  network file system) is waited for at most ``cache_lock_timeout`` seconds; then the
  waiter warns, naming the holder, and compiles the kernel itself.  Two compiles of one
  kernel give the same entry, so the only cost is the time.
* **Network file systems**: Linux maps ``flock`` on NFS to a POSIX byte-range lock held
  through the NFS lock manager (NLM on NFSv3, the protocol itself on NFSv4), so it
  works across hosts where locking works.  When a client host dies, the server keeps its
  lock until its lease ends (90 s by default on NFSv4).  A file system that refuses locks
  (``ENOLCK``, ``EOPNOTSUPP``: some NFS mounts with ``nolock``, some FUSE file systems)
  or a lock directory that cannot be created is no error: the kernel is compiled
  without a lock, as it would have been without this module.
* **Where there is no fcntl** (Windows), locking is skipped the same way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: compile without locks
    fcntl = None  # type: ignore[assignment]

#: The longest pause between two tries of a held lock: short next to a compilation
#: (tens of milliseconds at least), long enough that waiting costs no CPU to speak of.
_MAX_POLL_S = 0.025


class KeyLock:
    """``with KeyLock(path, timeout, kernel):`` holds the lock at ``path``, or, where that
    cannot be had (no locking, or ``timeout`` seconds passed), goes on without it;
    ``held`` says which."""

    def __init__(self, path: Path, timeout: float, kernel: str = "kernel"):
        self.path = path
        self.timeout = timeout
        self.kernel = kernel
        self.held = False
        #: How long acquiring took (seconds): the time spent waiting for another process.
        self.waited = 0.0
        self._fd: int | None = None

    def __enter__(self) -> "KeyLock":
        start = time.monotonic()
        try:
            self.held = self._acquire(start)
        finally:
            self.waited = time.monotonic() - start
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def release(self) -> None:
        fd, self._fd = self._fd, None
        self.held = False
        if fd is not None:
            try:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass
            finally:
                os.close(fd)

    def _acquire(self, start: float) -> bool:
        if fcntl is None:
            return False
        fd = self._open()
        if fd is None:
            return False
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (BlockingIOError, PermissionError):  # EWOULDBLOCK; EACCES on some systems
                pass
            except OSError:  # ENOLCK, EOPNOTSUPP, EINVAL: this file system does not lock
                os.close(fd)
                return False
            waited = time.monotonic() - start
            if waited >= self.timeout:
                holder = _read_holder(fd)
                os.close(fd)
                from .cache import warn

                warn(f"kernel '{self.kernel}': waited {waited:.0f} s for {holder} compiling the same kernel "
                     f"(lock {self.path}); compiling it here as well. Raise the setting cache_lock_timeout "
                     "if compiles take longer.")
                return False
            time.sleep(min(delay, max(self.timeout - waited, 0.0)))
            delay = min(delay * 2, _MAX_POLL_S)
        self._fd = fd
        _write_holder(fd)
        return True

    def _open(self) -> int | None:
        flags = getattr(os, "O_CLOEXEC", 0)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if os.path.isdir(self.path) and not os.path.islink(self.path):
                from .cache_files import remove_path

                remove_path(self.path)  # a directory where the lock file belongs: replaced, once
            try:
                # 0o666 less the umask: a lock file made by one member of a team is
                # writable by the others where the umask allows.
                return os.open(self.path, os.O_RDWR | os.O_CREAT | flags, 0o666)
            except PermissionError:
                # Made by another user and not writable: flock needs only a reader.
                return os.open(self.path, os.O_RDONLY | flags)
        except OSError:
            return None  # no lock directory (a read-only cache): compile without a lock


def _write_holder(fd: int) -> None:
    """Name this process in the lock file, for the warning of a waiter that gives up."""
    text = f"pid {os.getpid()} on host {_host()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode()
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text, 0)
    except (OSError, AttributeError):
        pass


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
    except (OSError, AttributeError):
        text = ""
    return f"another process ({text})" if text else "another process"


def _host() -> str:
    try:
        return os.uname().nodename
    except AttributeError:
        return "?"
