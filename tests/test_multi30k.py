"""Tests for the Multi30k data module: real files via the mirror, token-budget batching, bad inputs."""

import copy
import gzip
import hashlib
import random
import unicodedata
from pathlib import Path

import pytest
import torch
from zoo_run import SHARED_DATA, all_indices, needs_shared

from zoo.data import resolver
from zoo.data.batching import EpochBatchSampler, pack_by_tokens
from zoo.data.bpe import BOS_ID, EOS_ID, PAD_ID
from zoo.data.multi30k import Multi30k, read_gz_lines
from zoo.data.resolver import DataError

pytestmark = pytest.mark.e2e  # every test reads the real dataset through its datamodule

PAIRS = {"train": 29_000, "val": 1_014, "test": 1_000}


@pytest.fixture(scope="module")
def dm(tmp_path_factory, shared_data):
    dm = Multi30k(vocab_size=1000, data_dir=tmp_path_factory.mktemp("m30k") / "data", mirror=str(shared_data))
    dm.setup()
    return dm


def cost(batch, ds):
    """Tokens of a batch's padded src + tgt tensors: B * (max S + max T)."""
    return len(batch) * (max(ds.src_lens[i] for i in batch) + max(ds.tgt_lens[i] for i in batch))


def padding(batches, ds):
    total = sum(cost(b, ds) for b in batches)
    return 1 - sum(ds.src_lens[i] + ds.tgt_lens[i] for b in batches for i in b) / total


@needs_shared
def test_pairs_vocab_and_raw_strings(dm):
    for split, ds in (("train", dm.train_set), ("val", dm.val_set), ("test", dm.test_set)):
        assert len(ds) == PAIRS[split] and dm.skipped[split] == 0 and dm.truncated[split] == 0
        assert all(s[-1] == EOS_ID and len(s) <= dm.max_len for s in ds.src)
        assert all(a[0] == BOS_ID and a[1:] == b[:-1] and b[-1] == EOS_ID for a, b in zip(ds.tgt_in, ds.tgt_out))
    assert dm.src_tokenizer is dm.tgt_tokenizer and dm.src_vocab_size == dm.tgt_vocab_size == 1000
    assert dm.val_refs == read_gz_lines(SHARED_DATA / "multi30k" / "val.en.gz")
    assert dm.val_srcs == read_gz_lines(SHARED_DATA / "multi30k" / "val.de.gz")
    assert dm.test_refs == read_gz_lines(SHARED_DATA / "multi30k" / "test_2016_flickr.en.gz")
    assert len(dm.test_srcs) == 1000 and dm.pad_id == PAD_ID


@needs_shared
def test_batches_shapes_masks_and_index(dm):
    for loader, ds, refs in (
        (dm.train_dataloader(), dm.train_set, dm.train_set.refs),
        (dm.val_dataloader(), dm.val_set, dm.val_refs),
    ):
        for _, batch in zip(range(3), loader):
            src, tgt_in, tgt_out = batch["src"], batch["tgt_in"], batch["tgt_out"]
            (b, s), t = src.shape, tgt_in.shape[1]
            assert tgt_out.shape == (b, t) and batch["index"].shape == (b,) and b * (s + t) <= dm.max_tokens
            assert torch.equal(batch["src_key_padding_mask"], src == PAD_ID)
            assert torch.equal(batch["tgt_key_padding_mask"], tgt_in == PAD_ID)
            assert torch.equal(tgt_out == PAD_ID, tgt_in == PAD_ID)
            for k, i in enumerate(batch["index"].tolist()):
                assert src[k][src[k] != PAD_ID].tolist() == ds.src[i]
                assert dm.tgt_tokenizer.decode(tgt_out[k]) == unicodedata.normalize("NFKC", refs[i])
    val = dm.eval_batches(dm.val_set)
    lengths = [dm.val_set.src_lens[i] for b in val for i in b]
    assert lengths == sorted(lengths) and all_indices(val) == list(range(1014))  # sorted, not shuffled
    assert sum(len(b["index"]) for b in dm.test_dataloader()) == 1000


@needs_shared
def test_token_budget_and_padding(dm):
    ds = dm.train_set
    batches = dm.train_batches(0)
    assert all(cost(b, ds) <= 4096 for b in batches)
    assert all(cost(b, dm.test_set) <= 4096 for b in dm.eval_batches(dm.test_set))
    order = list(range(len(ds)))
    random.Random(0).shuffle(order)
    unsorted = pack_by_tokens(order, ds.src_lens, ds.tgt_lens, 4096)
    assert padding(batches, ds) < 0.1 < 0.3 < padding(unsorted, ds)  # measured (vocab 1000): 0.05 vs 0.50
    assert len(batches) < 0.6 * len(unsorted)
    assert sum(cost(b, ds) for b in batches) / len(batches) > 0.95 * 4096  # batches are nearly full


@needs_shared
def test_every_pair_once_per_epoch_and_deterministic(dm):
    epochs = [dm.train_batches(e) for e in range(3)]
    for batches in epochs:
        assert all_indices(batches) == list(range(29_000))
    assert len({len(b) for b in epochs}) == 1  # the same number of batches every epoch
    assert sorted(map(len, epochs[0])) == sorted(map(len, epochs[1]))  # ... and the same shapes
    assert epochs[0] != epochs[1] and {tuple(sorted(b)) for b in epochs[0]} != {tuple(sorted(b)) for b in epochs[1]}
    assert dm.train_batches(2) == epochs[2]
    other = copy.copy(dm)
    other.seed = 7
    assert other.train_batches(0) != epochs[0]
    loader = dm.train_dataloader()
    assert len(loader) == len(epochs[0])
    loader.batch_sampler.set_epoch(1)
    state = torch.get_rng_state()
    assert [b["index"].tolist() for b in loader] == epochs[1]
    assert torch.equal(state, torch.get_rng_state())


@needs_shared
def test_rank_sharding_partitions_batches(dm):
    full = dm.train_batches(0)
    for world in (2, 4):
        shards = [list(EpochBatchSampler(dm.train_batches, r, world)) for r in range(world)]
        kept = full[: len(full) // world * world]
        assert {len(s) for s in shards} == {len(kept) // world}
        assert sorted(map(tuple, sum(shards, []))) == sorted(map(tuple, kept))


@needs_shared
def test_separate_vocabularies_and_tokenizer_files(tmp_path):
    kw = dict(
        vocab_size=500,
        joint_vocab=False,
        limit=2000,
        tokenizer_dir=str(tmp_path / "tok"),
        data_dir=tmp_path / "data",
        mirror=str(SHARED_DATA),
        src_lang="en",
        tgt_lang="fr",
        max_tokens=1024,
    )
    dm = Multi30k(**kw)
    dm.setup()
    assert len(dm.train_set) == 2000 and dm.src_tokenizer is not dm.tgt_tokenizer
    names = sorted(p.name for p in (tmp_path / "tok").iterdir())  # tokenizer.<lang>.<digest of its data>.json
    assert [n.split(".")[1] for n in names] == ["en", "fr"] and all(len(n.split(".")[2]) == 16 for n in names)
    assert dm.src_vocab_size == dm.tgt_vocab_size == 500
    assert dm.src_tokenizer.decode(dm.train_set.src[0]) == dm.train_set.srcs[0]
    assert all(cost(b, dm.train_set) <= 1024 for b in dm.train_batches(0))
    again = Multi30k(**kw)
    again.setup()  # loads the saved files
    assert again.tgt_tokenizer.state_dict() == dm.tgt_tokenizer.state_dict()
    other = Multi30k(**{**kw, "vocab_size": 400, "limit": 1000})  # other data: its own files, never the cached ones
    other.setup()
    assert other.src_vocab_size == 400 and len(list((tmp_path / "tok").iterdir())) == 4


def test_missing_language_pair():
    with pytest.raises(DataError) as e:
        Multi30k(src_lang="cs", test_split="test_2017_flickr")
    msg = str(e.value)
    assert "test_2017_flickr" in msg and "['de', 'en', 'fr']" in msg and "test_2016_flickr" in msg
    with pytest.raises(DataError, match="the splits are"):
        Multi30k(test_split="test_2099")
    with pytest.raises(DataError, match="no xx files"):
        Multi30k(tgt_lang="xx")


def write_m30k(root: Path, monkeypatch, texts: dict[str, str]):
    """Write gzip files multi30k/<split>.<lang>.gz under root and register their checksums."""
    for key, text in texts.items():
        name = f"multi30k/{key}.gz"
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        monkeypatch.setitem(resolver.FILES, name, hashlib.sha256(path.read_bytes()).hexdigest())


GOOD = {
    "val.de": "ein hund\n",
    "val.en": "a dog\n",
    "test_2016_flickr.de": "eine katze\n",
    "test_2016_flickr.en": "a cat\n",
}


def test_parallel_files_of_different_lengths(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_m30k(
        data, monkeypatch, {**GOOD, "train.de": "ein hund\neine katze\nein mann\n", "train.en": "a dog\na cat\n"}
    )
    with pytest.raises(DataError) as e:
        Multi30k(vocab_size=50, data_dir=data).setup()
    msg = str(e.value)
    assert str(data / "multi30k/train.de.gz") in msg and str(data / "multi30k/train.en.gz") in msg
    assert "3 lines" in msg and "2 lines" in msg


def test_blank_pairs_skipped_and_counted(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_m30k(
        data,
        monkeypatch,
        {
            **GOOD,
            "train.de": "ein hund\n\neine katze\nein mann\n  \n",
            "train.en": "a dog\na bird\n\na man\n\n",
            "val.en": "a dog\r\n",
        },
    )
    dm = Multi30k(vocab_size=60, data_dir=data, max_len=2)
    dm.setup()
    assert dm.skipped == {"train": 3, "val": 0, "test": 0}
    assert dm.train_set.srcs == ["ein hund", "ein mann"] and dm.train_set.refs == ["a dog", "a man"]
    assert dm.val_refs == ["a dog"] and dm.test_srcs == ["eine katze"]
    assert dm.truncated["train"] > 0 and all(len(s) <= 2 for s in dm.train_set.src + dm.train_set.tgt_in)
    with pytest.raises(DataError, match="max_tokens"):
        Multi30k(vocab_size=60, data_dir=data, max_tokens=4).setup()
