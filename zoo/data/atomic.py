"""Atomic file writes: a temporary file beside the target, flushed to disk, then renamed over it (os.replace,
atomic on POSIX), so an interrupted write or a concurrent reader never sees a partial file. The temporary is
created with mode 0o666, which the OS masks with the process umask, so the file gets the mode open() would give
it (tempfile.mkstemp would leave 0o600). Used for results.json, checkpoints, token files, tokenizers and
downloads."""

import os
import secrets
from contextlib import contextmanager
from pathlib import Path

_TRIES = 100


def _create(path: Path, suffix: str) -> tuple[int, Path]:
    """(an fd open for writing, its name): a new file .<name>.<random><suffix> beside `path`, mode 0o666 & ~umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(_TRIES):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path} after {_TRIES} tries")


@contextmanager
def atomic_path(path, suffix: str = ".tmp"):
    """Yield the name of a new, empty temporary file beside `path` (its folder created if missing) for the caller
    to write by name; when the block ends without an error it replaces `path`. On any error the temporary is
    removed and `path` is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create(path, suffix)
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def atomic_file(path, mode: str = "wb", suffix: str = ".tmp", encoding: str | None = None):
    """Yield a file object (`mode` "wb" or "w"; text in `encoding`, UTF-8 by default) on a temporary file beside
    `path`; when the block ends without an error the file is flushed and fsynced, then replaces `path`. On any
    error the temporary is removed and `path` is left as it was."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes a new file: mode must be 'w' or 'wb', got {mode!r}")
    with atomic_path(path, suffix) as tmp:
        text = {"encoding": encoding or "utf-8"} if mode == "w" else {}
        with open(tmp, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
