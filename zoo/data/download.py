"""The download step of the resolver: a dataset file streamed from a URL, checked against its SHA-256, and moved
into place atomically."""

import hashlib
import urllib.request
from pathlib import Path

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from zoo.data.atomic import atomic_file
from zoo.data.checksums import mismatch
from zoo.errors import DataError


def download(url: str, dest: Path, name: str, expected: str, progress: bool, timeout: float) -> None:
    """Stream url to a temp file next to dest, check its SHA-256, then move it into place atomically.

    Args:
        progress: show a rich progress bar. timeout: seconds, per network operation.
    Raises:
        DataError: for a checksum mismatch (nothing is left at dest); urllib's errors (OSError,
            http.client.HTTPException, ValueError) for a URL that cannot be read.
    """
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), disable=not progress
    )
    h = hashlib.sha256()
    with atomic_file(dest, suffix=".part") as f:  # a mismatch raises inside: nothing is left at dest
        with urllib.request.urlopen(url, timeout=timeout) as r, bar:
            task = bar.add_task(f"downloading {name}", total=int(r.headers.get("Content-Length") or 0) or None)
            while chunk := r.read(1 << 16):
                f.write(chunk)
                h.update(chunk)
                bar.update(task, advance=len(chunk))
        if h.hexdigest() != expected:
            raise DataError(mismatch(name, url, expected, h.hexdigest()))
