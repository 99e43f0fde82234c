"""The memory-mapped token file (zoo.data.token_file) and Tiny Shakespeare reading from it."""

import gc
import json
import pickle
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from zoo_run import needs_shared, shakespeare_dm, shakespeare_text

from zoo.data.shakespeare import RandomWindows
from zoo.data.token_file import Tokens, open_token_file, read_info, sidecar, token_dtype, write_token_file


def test_dtype_follows_vocab_size():
    assert token_dtype(65) == np.uint16 and token_dtype(65536) == np.uint16  # ids 0..65535 fit
    assert token_dtype(65537) == np.uint32 and token_dtype(1 << 32) == np.uint32
    for bad in (0, (1 << 32) + 1):
        with pytest.raises(ValueError, match="vocab_size"):
            token_dtype(bad)


@pytest.mark.parametrize("vocab_size,dtype", [(50257, "uint16"), (100_000, "uint32")])
def test_write_and_read_back(tmp_path, vocab_size, dtype):
    rng = np.random.default_rng(0)
    chunks = [rng.integers(0, vocab_size, n) for n in (1000, 0, 37, 5000)]
    chunks[1] = torch.tensor([], dtype=torch.long)
    chunks.append(torch.tensor([vocab_size - 1, 0]))  # both ends of the id range
    ref = np.concatenate([np.asarray(c, dtype=np.int64) for c in chunks])
    path = tmp_path / "sub" / "corpus.bin"
    t = write_token_file(path, iter(chunks), vocab_size, source_sha256="ab" * 32, meta={"k": [1, 2]})
    assert path.stat().st_size == len(ref) * np.dtype(dtype).itemsize
    info = json.loads(sidecar(path).read_text())
    assert info == {
        "format": "zoo-tokens-1",
        "dtype": dtype,
        "length": len(ref),
        "vocab_size": vocab_size,
        "source_sha256": "ab" * 32,
        "meta": {"k": [1, 2]},
    }
    assert t.info == info and len(t) == len(ref) and t.dtype == np.dtype(dtype)
    assert not list(path.parent.glob("*.part"))  # the temporaries were renamed or removed
    again = open_token_file(path, source_sha256="ab" * 32)
    assert torch.equal(again[:], torch.from_numpy(ref)) and again[:].dtype == torch.long
    assert again[-1] == 0 and again[len(ref) - 2] == vocab_size - 1 and list(again)[:5] == ref[:5].tolist()
    v = again.view(100, 3000)
    assert torch.equal(v[10:20], torch.from_numpy(ref[110:120]))
    starts = np.array([0, 5, 2890])
    assert torch.equal(v.windows(starts, 10), torch.from_numpy(ref[100 + starts[:, None] + np.arange(10)]))
    with pytest.raises(IndexError, match="outside"):
        v.windows([2891], 10)
    with pytest.raises(ValueError, match="outside"):
        v.view(0, 3001)
    # a DataLoader worker or DDP rank receives the path and range, not the tokens
    blob = pickle.dumps(v)
    assert len(blob) < 1000
    w = pickle.loads(blob)
    assert (w.start, w.stop) == (100, 3000) and torch.equal(w[:], v[:])


def test_stale_or_foreign_files_are_not_opened(tmp_path):
    path = tmp_path / "c.bin"
    assert open_token_file(path) is None  # missing
    write_token_file(path, [np.arange(100)], 100, source_sha256="aa")
    assert open_token_file(path, source_sha256="bb") is None  # made from another text
    assert torch.equal(open_token_file(path, source_sha256="aa")[:], torch.arange(100))  # its own text: opened
    with open(path, "r+b") as f:  # truncated (a crash while copying it, say)
        f.truncate(150)
    assert read_info(path) is None and open_token_file(path) is None
    with pytest.raises(ValueError, match=r"token id 7 at chunk offset 3 is outside \[0, vocab_size=7\)"):
        write_token_file(tmp_path / "bad.bin", [[1, 2, 3], [4, 7]], 7)
    assert not (tmp_path / "bad.bin").exists() and not sidecar(tmp_path / "bad.bin").exists()
    assert not list(tmp_path.glob(".*part"))
    with pytest.raises(ValueError, match="1-D integer"):
        write_token_file(tmp_path / "bad.bin", [np.zeros((2, 2), dtype=np.int64)], 7)


def _rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@pytest.mark.e2e
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RSS from /proc")
def test_resident_memory_does_not_grow_with_the_corpus(tmp_path):
    """A 300 MB token file (150M uint16 tokens), written from a generator and sampled with 20,000 random
    windows of 257 tokens across all of it: the process RSS grows by < 50 MB while reading (measured: 1 MB;
    one long-lived np.memmap read at the same windows grows it by 286 MB, nearly the whole file)."""
    n, chunk, period = 150_000_000, 10_000_000, 65521  # token at position p is p % 65521
    path = tmp_path / "big.bin"
    try:
        tokens = write_token_file(path, (np.arange(a, a + chunk) % period for a in range(0, n, chunk)), 65536)
        assert path.stat().st_size == 2 * n and len(tokens) == n
        data = RandomWindows(tokens, block_size=256, num_windows=20_000, seed=0)
        loader = DataLoader(data, batch_size=64)
        first = next(iter(loader))  # warm up the allocator and imports before the baseline
        gc.collect()
        base = _rss_mb()
        starts = []
        for i, (x, y) in enumerate(loader):
            s = np.array([data.start(k) for k in range(64 * i, 64 * i + len(x))])
            starts.append(s)
            if i % 50 == 0:  # the windows hold the right tokens
                assert torch.equal(x, torch.from_numpy((s[:, None] + np.arange(256)) % period))
                assert torch.equal(y[:, :-1], x[:, 1:])
        growth = _rss_mb() - base
        starts = np.concatenate(starts)
        assert len(starts) == 20_000 and starts.min() < n * 0.01 and starts.max() > n * 0.99  # all of the file
        assert growth < 50, f"RSS grew by {growth:.0f} MB while reading a 300 MB token file"
        del first, tokens, data, loader
    finally:
        path.unlink(missing_ok=True)
        sidecar(path).unlink(missing_ok=True)


def make_dm(tmp_path, **kw):
    return shakespeare_dm(
        tmp_path, **{"block_size": 16, "batch_size": 4, "batches_per_epoch": 8, "val_windows": 12, **kw}
    )


@needs_shared
def test_shakespeare_token_file_is_written_once(tmp_path, monkeypatch):
    dm = make_dm(tmp_path)
    text = shakespeare_text()
    assert dm.token_path.parent == tmp_path / "data" / "tokens" and dm.token_path.stat().st_size == 2 * len(text)
    info = read_info(dm.token_path)
    assert info["dtype"] == "uint16" and info["length"] == len(text) and info["vocab_size"] == 65
    assert info["source_sha256"] == dm._key()  # the text's content and the tokenizing settings
    monkeypatch.setattr("zoo.data.text_corpus.sha256sum", lambda p: "another text")
    assert dm._key() != info["source_sha256"]
    monkeypatch.undo()
    assert isinstance(dm.train_data, Tokens) and dm.tokenizer.decode(dm.train_data[:40]) == text[:40]
    batches = [b for b in dm.train_dataloader()] + [b for b in dm.val_dataloader()]
    # a second datamodule reuses the file: the text is not tokenized again, and the batches are identical
    monkeypatch.setattr("zoo.data.text_corpus.write_token_file", lambda *a, **k: pytest.fail("tokenized again"))
    again = make_dm(tmp_path)
    assert again.tokenizer.chars == dm.tokenizer.chars
    for (x, y), (x2, y2) in zip(batches, [b for b in again.train_dataloader()] + [b for b in again.val_dataloader()]):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    monkeypatch.undo()
    with open(dm.token_path, "r+b") as f:  # a damaged file is rebuilt
        f.truncate(100)
    rebuilt = make_dm(tmp_path)
    assert rebuilt.token_path.stat().st_size == 2 * len(text)
    assert torch.equal(next(iter(rebuilt.train_dataloader()))[0], batches[0][0])


@needs_shared
def test_workers_and_pinned_memory_give_the_same_batches(tmp_path):
    dm = make_dm(tmp_path)
    ref = [b for b in dm.train_dataloader()] + [b for b in dm.val_dataloader()]
    other = make_dm(tmp_path, num_workers=2, pin_memory=True)
    loader = other.train_dataloader()
    assert loader.num_workers == 2 and loader.pin_memory
    got = [b for b in loader] + [b for b in other.val_dataloader()]
    assert len(got) == len(ref) == 8 + 3
    for (x, y), (x2, y2) in zip(ref, got):
        assert torch.equal(x, x2) and torch.equal(y, y2)


@needs_shared
def test_each_rank_reads_its_own_shard_of_every_global_batch(tmp_path):
    """With world_size=2, rank r's k-th batch is rows r, r+2, ... of the 1-process run's k-th batch: the
    ranks' windows are disjoint and together make the same global batch."""
    dm = make_dm(tmp_path)
    full = [x for x, _ in dm.train_dataloader()]
    shards = []
    for rank in range(2):
        progress = SimpleNamespace(total=SimpleNamespace(completed=0))
        dm.trainer = SimpleNamespace(
            global_rank=rank,
            world_size=2,
            fit_loop=SimpleNamespace(epoch_loop=SimpleNamespace(batch_progress=progress)),
        )
        shards.append([x for x, _ in dm.train_dataloader()])
    dm.trainer = None
    assert len(shards[0]) == len(shards[1]) == len(full) == 8
    for k, x in enumerate(full):
        assert shards[0][k].shape == (2, 16)
        assert torch.equal(shards[0][k], x[0::2]) and torch.equal(shards[1][k], x[1::2])
