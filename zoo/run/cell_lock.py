"""One process at a time in a scaling cell's folder. Two processes over one sweep folder (the study's way to use
two cores) may reach the same cell; the second skips it while the first is alive, instead of training the same
branches beside it into the same files. A lock whose process has died (a killed leg) is taken over."""

import atexit
import os
import time
from pathlib import Path

LOCK = "cell.lock"  # in the cell's folder: the PID of the process training it


def _holder(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def take_lock(out: Path) -> int | None:
    """Take the lock of the cell folder `out` for this process: None when taken (or already this process's), else
    the PID of the live process that holds it. Released by release_lock, or when this process exits."""
    path = Path(out) / LOCK
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pid = _holder(path)
            if pid is None:  # just created, its PID not yet written: read it again
                time.sleep(0.2)
                pid = _holder(path)
            if pid == os.getpid():
                return None
            if pid is not None and _alive(pid):
                return pid
            path.unlink(missing_ok=True)  # a dead process's lock
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        atexit.register(release_lock, Path(out))
        return None
    return _holder(path)


def release_lock(out: Path) -> None:
    """Remove the cell folder's lock if this process holds it."""
    path = Path(out) / LOCK
    if _holder(path) == os.getpid():
        path.unlink(missing_ok=True)
