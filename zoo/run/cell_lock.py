"""One process at a time in a scaling cell's folder. Two processes over one sweep folder (the study's way to use
two cores) may reach the same cell; the second skips it while the first is alive, instead of training the same
branches beside it into the same files.

The lock is an exclusive flock(2) on `cell.lock` (POSIX), held while this process trains the cell: the kernel
grants it to one process at a time and drops it when its holder exits or is killed, so a dead process's lock
is free without a check of its PID, and two processes cannot both take it over. The file holds the holder's
PID, for the message of the one that skips."""

import atexit
import fcntl
import os
import time
from pathlib import Path

LOCK = "cell.lock"  # in the cell's folder: locked by the process training it, which writes its PID there
_HELD: dict[Path, int] = {}  # lock file -> the open descriptor holding its flock, in this process


def _holder(path: Path) -> int:
    """The PID written in a held lock; 0 when it cannot be read (its holder has locked it and not yet written)."""
    for _ in range(3):
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            time.sleep(0.1)
    return 0


def take_lock(out: Path) -> int | None:
    """Take the lock of the cell folder `out` for this process: None when taken (or already this process's), else
    the PID of the live process that holds it (0: not yet written). Released by release_lock, or when this process
    exits or dies."""
    path = (Path(out) / LOCK).resolve()
    if path in _HELD:
        return None
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # another process holds it
        os.close(fd)
        return _holder(path)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _HELD[path] = fd
    atexit.register(release_lock, Path(out))
    return None


def release_lock(out: Path) -> None:
    """Release the cell folder's lock if this process holds it (the file stays: removing it would let a process
    that opened it before lock a file no one else sees)."""
    fd = _HELD.pop((Path(out) / LOCK).resolve(), None)
    if fd is not None:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
