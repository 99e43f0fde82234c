"""A tokenized corpus on disk: a flat binary file of token ids that every process memory-maps.

A token file ``<name>.bin`` holds the ids back to back in native byte order, ``uint16`` when every id fits
(vocab_size <= 65536) and ``uint32`` otherwise (the nanoGPT ``train.bin`` layout). Its sidecar
``<name>.bin.json`` records the dtype, the number of tokens, the vocabulary size, the SHA-256 of the source
the tokens came from, and free-form metadata (e.g. the tokenizer's state). The file is written once,
atomically (a temporary file renamed into place, the sidecar last), so processes that race to build it
never see a half-written file, and a stale or truncated file is detected and rebuilt.

Reading never loads the corpus: `Tokens` maps the file for each read and unmaps it afterwards (as
nanoGPT re-creates its np.memmap per batch), so the pages a process touched do not stay in its resident
set; the operating system's page cache, shared by all ranks and DataLoader workers, holds the hot part.
Measured (tests/test_token_file.py): sampling 20,000 windows across a 300 MB file grows RSS by 1 MB,
while one long-lived np.memmap read at the same windows grows it by 286 MB (nearly the whole file).
"""

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch

from zoo.data.atomic import atomic_file

FORMAT = "zoo-tokens-1"


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype for ids 0 .. vocab_size-1: uint16 if vocab_size <= 65536, else uint32.

    Raises:
        ValueError: if vocab_size < 1 or > 2**32.
    """
    if not 1 <= vocab_size <= 1 << 32:
        raise ValueError(f"vocab_size={vocab_size} must be between 1 and 2**32")
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def sidecar(path: str | Path) -> Path:
    """The metadata file of a token file: ``<path>.json``."""
    return Path(str(path) + ".json")


def _atomic_write(dest: Path, write) -> None:
    """Call write(binary file) on a temporary file beside dest, fsync it, then rename it over dest
    (zoo.data.atomic)."""
    with atomic_file(dest, suffix=".part") as f:
        write(f)


def _write_chunks(f, chunks: Iterable, vocab_size: int, dtype: np.dtype) -> int:
    """Write each chunk of ids (1-D integer array, list or tensor) to the binary file f as `dtype`; returns the
    number of ids written. Raises ValueError for a chunk that is not 1-D integers, or an id outside
    [0, vocab_size) (naming its offset)."""
    length = 0
    for chunk in chunks:
        a = chunk.numpy() if isinstance(chunk, torch.Tensor) else np.asarray(chunk)
        if a.size == 0:
            continue
        if a.ndim != 1 or not np.issubdtype(a.dtype, np.integer):
            raise ValueError(f"token chunks must be 1-D integer arrays, got shape {a.shape} dtype {a.dtype}")
        lo, hi = int(a.min()), int(a.max())
        if lo < 0 or hi >= vocab_size:
            raise ValueError(
                f"token id {lo if lo < 0 else hi} at chunk offset {length} is outside [0, vocab_size={vocab_size})"
            )
        f.write(a.astype(dtype, copy=False).tobytes())
        length += a.size
    return length


def write_token_file(
    path: str | Path, chunks: Iterable, vocab_size: int, source_sha256: str | None = None, meta: dict | None = None
) -> "Tokens":
    """Write token ids to `path` (and its sidecar) atomically, one chunk at a time, and open the result.

    Args:
        path: the .bin file to create (its folder is created if missing); an existing file is replaced.
        chunks: iterable of 1-D integer arrays, lists or tensors of ids, concatenated in order; memory use is
            one chunk, so a corpus larger than RAM can be written from a generator.
        vocab_size: ids must lie in [0, vocab_size); chooses the dtype (token_dtype).
        source_sha256: SHA-256 of what the tokens were made from; `open_token_file` can require it.
        meta: extra JSON-serializable data stored in the sidecar under "meta".
    Returns:
        the written file as `Tokens`.
    Raises:
        ValueError: if an id is outside [0, vocab_size) or a chunk is not 1-D (nothing is left behind).
        OSError: if the folder cannot be created or written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(vocab_size)
    length = 0

    def write(f):
        nonlocal length
        length = _write_chunks(f, chunks, vocab_size, dtype)

    _atomic_write(path, write)
    info = {
        "format": FORMAT,
        "dtype": dtype.name,
        "length": length,
        "vocab_size": vocab_size,
        "source_sha256": source_sha256,
        "meta": meta or {},
    }
    _atomic_write(sidecar(path), lambda f: f.write(json.dumps(info, indent=1).encode()))
    tokens = Tokens(path, dtype.name)
    tokens.info = info
    return tokens


def read_info(path: str | Path) -> dict | None:
    """The sidecar of a complete, consistent token file, or None if it is missing, unreadable, of another
    format, or the .bin size does not match its dtype and length (a stale or truncated file)."""
    path = Path(path)
    try:
        info = json.loads(sidecar(path).read_text())
        ok = info.get("format") == FORMAT and path.stat().st_size == info["length"] * np.dtype(info["dtype"]).itemsize
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if ok else None


def open_token_file(path: str | Path, source_sha256: str | None = None) -> "Tokens | None":
    """Open an existing token file read-only, or return None if it is missing, incomplete, or (when
    source_sha256 is given) was made from another source: the caller then (re)builds it."""
    info = read_info(path)
    if info is None or (source_sha256 is not None and info.get("source_sha256") != source_sha256):
        return None
    tokens = Tokens(path, info["dtype"], 0, info["length"])
    tokens.info = info
    return tokens


class Tokens:
    """A read-only 1-D sequence of token ids: the range [start, stop) of a token file.

    Indexing returns plain data: ``t[i]`` an int, ``t[a:b]`` a torch.long tensor of shape (b - a,) (a copy;
    step 1 only). `windows` reads many equal-length slices with one mapping. The object pickles as its
    path and range (a few bytes), so DataLoader workers and DDP ranks open the file themselves instead of
    receiving a copy of the data.

    Args:
        path: the token file.
        dtype: "uint16" or "uint32" (from the sidecar).
        start, stop: the range of token positions; stop=None means the end of the file.
    Attributes:
        info: the sidecar dict when opened by open_token_file / write_token_file, else None.
    """

    def __init__(self, path: str | Path, dtype: str, start: int = 0, stop: int | None = None):
        self.path, self.dtype = Path(path), np.dtype(dtype)
        total = self.path.stat().st_size // self.dtype.itemsize
        stop = total if stop is None else stop
        if not 0 <= start <= stop <= total:
            raise ValueError(f"range [{start}, {stop}) is outside the {total} tokens of {self.path}")
        self.start, self.stop, self.total = start, stop, total
        self.info = None

    def __len__(self) -> int:
        return self.stop - self.start

    def __repr__(self) -> str:
        return f"Tokens({str(self.path)!r}, {self.dtype.name}, [{self.start}, {self.stop}))"

    def view(self, start: int, stop: int) -> "Tokens":
        """Tokens [start, stop) of this range (positions relative to it), sharing the file."""
        if not 0 <= start <= stop <= len(self):
            raise ValueError(f"view [{start}, {stop}) is outside a range of {len(self)} tokens")
        return Tokens(self.path, self.dtype.name, self.start + start, self.start + stop)

    def _mapped(self) -> np.memmap:
        # a fresh read-only mapping of the whole file, unmapped when the caller drops it
        return np.memmap(self.path, dtype=self.dtype, mode="r", shape=(self.total,))

    def windows(self, starts, n: int) -> torch.Tensor:
        """Tokens [s, s + n) for each s in starts: a (len(starts), n) torch.long tensor.

        Raises:
            IndexError: if a window does not lie inside this range.
        """
        s = np.asarray(starts, dtype=np.int64).reshape(-1)
        if len(s) and (s.min() < 0 or s.max() + n > len(self)):
            raise IndexError(
                f"window [{int(s.max())}, {int(s.max()) + n}) or [{int(s.min())}, ...) is outside "
                f"a range of {len(self)} tokens"
            )
        if len(s) == 0 or n == 0:
            return torch.zeros(len(s), n, dtype=torch.long)
        m = self._mapped()
        out = np.asarray(m[(self.start + s)[:, None] + np.arange(n)], dtype=np.int64)  # fancy index: a copy
        del m
        return torch.from_numpy(out)

    def __getitem__(self, key):
        if isinstance(key, slice):
            a, b, step = key.indices(len(self))
            if step != 1:
                raise ValueError("Tokens slices must have step 1")
            return self.windows([a], max(b - a, 0))[0]
        i = int(key)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"index {key} is outside a range of {len(self)} tokens")
        return int(self.windows([i], 1)[0, 0])

    def __iter__(self):
        for a in range(0, len(self), 1 << 20):
            yield from self[a : a + (1 << 20)].tolist()

    def __getstate__(self):
        return {
            "path": str(self.path),
            "dtype": self.dtype.name,
            "start": self.start,
            "stop": self.stop,
            "info": self.info,
        }

    def __setstate__(self, state):
        self.__init__(state["path"], state["dtype"], state["start"], state["stop"])
        self.info = state["info"]
