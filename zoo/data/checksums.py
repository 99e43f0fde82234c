"""The SHA-256 of a dataset file (cached per process) and the message of a checksum mismatch."""

import hashlib
import os
from pathlib import Path

_hash_cache: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, per process


def sha256sum(path: str | Path) -> str:
    """Return the hex SHA-256 of a file, cached per process while its size and mtime are unchanged.

    Args:
        path: file to hash.
    Returns:
        the 64-character lowercase hex digest.
    Raises:
        OSError: if the file cannot be read.
    """
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in _hash_cache:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        _hash_cache[key] = h.hexdigest()
    return _hash_cache[key]


def mismatch(name: str, where, expected: str, actual: str) -> str:
    """The message of dataset file `name` at `where` whose sha256 is `actual`, not `expected`."""
    return f"checksum mismatch for {name} at {where}: expected sha256 {expected}, got sha256 {actual}"
