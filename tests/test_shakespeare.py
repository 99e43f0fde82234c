"""Tests for the char-level Tiny Shakespeare data module and CharTokenizer."""

import hashlib

import pytest
import torch
from zoo_run import needs_shared, shakespeare_dm, shakespeare_text

from zoo.data import resolver
from zoo.data.char_tokenizer import CharTokenizer
from zoo.data.resolver import DataError

B, T = 4, 16


def make_dm(tmp_path, **kw):
    return shakespeare_dm(
        tmp_path, **{"block_size": T, "batch_size": B, "batches_per_epoch": 64 // B, "val_windows": 10, **kw}
    )


@pytest.fixture(scope="module")
def dm(tmp_path_factory, shared_data):
    return make_dm(tmp_path_factory.mktemp("shakespeare"))


@pytest.fixture(scope="module")
def text():
    return shakespeare_text()


@needs_shared
def test_vocab_and_split(dm, text):
    assert dm.vocab_size == 65 == dm.tokenizer.vocab_size
    n = len(text)
    assert len(dm.train_data) == int(0.9 * n) and len(dm.val_data) == n - int(0.9 * n)
    assert dm.tokenizer.decode(dm.val_data[:50]) == text[int(0.9 * n) :][:50]


@needs_shared
def test_train_batch_is_shifted_window(dm, text):
    loader = dm.train_dataloader()
    assert len(loader) == 64 // B
    x, y = next(iter(loader))
    assert x.shape == y.shape == (B, T) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    for i in range(B):  # batch i of epoch 0 holds items 0..B-1
        s = dm.train_set.start(i)
        assert dm.tokenizer.decode(x[i]) == text[s : s + T]
        assert dm.tokenizer.decode(y[i]) == text[s + 1 : s + T + 1]


@needs_shared
def test_windows_deterministic(dm, tmp_path):
    same = make_dm(tmp_path)
    other = make_dm(tmp_path, seed=1)
    first = next(iter(dm.train_dataloader()))[0]
    assert torch.equal(first, next(iter(same.train_dataloader()))[0])
    assert not torch.equal(first, next(iter(other.train_dataloader()))[0])
    # a new epoch draws new windows; validation windows are fixed and evenly spaced
    loader = dm.train_dataloader()
    loader.sampler.batches_done = lambda: len(loader)  # the stream after one epoch of batches
    assert not torch.equal(first, next(iter(loader))[0])
    assert torch.equal(next(iter(dm.val_dataloader()))[0], next(iter(other.val_dataloader()))[0])
    starts = dm.val_set.starts
    assert len(starts) == 10 and starts[0] == 0 and starts[-1] == len(dm.val_data) - T - 1


@needs_shared
def test_setup_idempotent(dm):
    data = dm.train_data
    dm.setup("fit")
    assert dm.train_data is data


def _fake_file(tmp_path, monkeypatch, content: bytes) -> str:
    name = "tiny_shakespeare/fake.txt"
    (tmp_path / "data" / "tiny_shakespeare").mkdir(parents=True)
    (tmp_path / "data" / name).write_bytes(content)
    monkeypatch.setitem(resolver.FILES, name, hashlib.sha256(content).hexdigest())
    return name


def test_empty_file(tmp_path, monkeypatch):
    name = _fake_file(tmp_path, monkeypatch, b"")
    with pytest.raises(DataError, match="empty"):
        make_dm(tmp_path, file=name, mirror=None)


def test_non_utf8_file(tmp_path, monkeypatch):
    name = _fake_file(tmp_path, monkeypatch, b"hello \xff world" * 10)
    with pytest.raises(DataError, match="offset 6") as e:
        make_dm(tmp_path, file=name, mirror=None)
    assert "fake.txt" in str(e.value) and "UTF-8" in str(e.value)


def test_block_size_too_large(tmp_path, monkeypatch):
    name = _fake_file(tmp_path, monkeypatch, b"abcdefghij" * 10)  # val split: 10 chars
    with pytest.raises(DataError, match="val split"):
        make_dm(tmp_path, file=name, mirror=None, block_size=10)
    make_dm(tmp_path, file=name, mirror=None, block_size=9)  # 10 >= 9 + 1: fine


def test_char_tokenizer():
    tok = CharTokenizer.from_text("hello world")
    assert tok.vocab_size == 8 and tok.chars == sorted(set("hello world"))
    assert tok.decode(tok.encode("old hero")) == "old hero"
    assert tok.decode(torch.tensor(tok.encode("low"))) == "low"
    with pytest.raises(ValueError, match="'z'"):
        tok.encode("old zoo")
    again = CharTokenizer.from_state_dict(tok.state_dict())
    assert again.chars == tok.chars and again.encode("hello") == tok.encode("hello")
