"""Tests for the SST-2 data module: real files via the mirror, batching, bucketing, resume, bad inputs."""

import copy
import hashlib
import warnings
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
from zoo_run import SHARED_DATA, all_indices, needs_shared

from zoo.data import resolver
from zoo.data.batching import EpochBatchSampler, padding_fraction
from zoo.data.bpe import CLS_ID, EOS_ID, PAD_ID
from zoo.data.resolver import DataError
from zoo.data.sst2 import SPLITS, SST2

pytestmark = pytest.mark.e2e  # every test reads the real dataset through its datamodule

ROWS = {"train": 67_349, "val": 872, "test": 1_821}  # lines of sentiment-{train,dev,test}; none is blank


@pytest.fixture(scope="module")
def dm(tmp_path_factory, shared_data):
    dm = SST2(
        batch_size=64, vocab_size=1000, data_dir=tmp_path_factory.mktemp("sst2") / "data", mirror=str(shared_data)
    )
    dm.setup()
    return dm


@needs_shared
def test_rows_vocab_and_examples(dm):
    for split, ds in (("train", dm.train_set), ("val", dm.val_set), ("test", dm.test_set)):
        assert len(ds) == ROWS[split] - dm.skipped[split] and dm.skipped[split] == 0
        assert all(r[0] == CLS_ID and r[-1] == EOS_ID and len(r) <= dm.max_len for r in ds.ids)
        assert set(ds.labels) == {0, 1}
    assert sum(dm.train_set.labels) == 37_569 and dm.truncated == {"train": 0, "val": 0, "test": 0}
    assert dm.vocab_size == dm.tokenizer.vocab_size == 1000
    assert (dm.num_classes, dm.pad_id) == (2, PAD_ID)
    first = (SHARED_DATA / "sst2" / "sentiment-train").read_text().split("\n")[0]
    assert dm.tokenizer.decode(dm.train_set.ids[0]) == first.split("\t")[0].strip()


@needs_shared
def test_batches_shapes_and_masks(dm):
    loader = dm.train_dataloader()
    assert len(loader) == 1053  # ceil(67349 / 64)
    for _, batch in zip(range(5), loader):
        ids, mask, labels, index = batch["ids"], batch["key_padding_mask"], batch["labels"], batch["index"]
        b, t = ids.shape
        assert ids.dtype == labels.dtype == index.dtype == torch.long and mask.dtype == torch.bool
        assert mask.shape == (b, t) and labels.shape == index.shape == (b,) and b <= 64
        assert torch.equal(mask, ids == PAD_ID)  # PAD never occurs inside an example
        assert (~mask).sum(1).tolist() == [len(dm.train_set.ids[i]) for i in index.tolist()]
        assert (~mask).sum(1).max() == t  # padded to the longest row only
        assert labels.tolist() == [dm.train_set.labels[i] for i in index.tolist()]
    val = list(dm.val_dataloader())
    lengths = [n for batch in val for n in (~batch["key_padding_mask"]).sum(1).tolist()]
    assert lengths == sorted(lengths) and len(lengths) == len(dm.val_set)  # sorted, everything once
    assert all_indices([b["index"].tolist() for b in val]) == list(range(len(dm.val_set)))
    assert sum(len(b["labels"]) for b in dm.test_dataloader()) == len(dm.test_set)


@needs_shared
def test_bucketing_reduces_padding(dm):
    unbucketed = copy.copy(dm)
    unbucketed.bucket = False
    lengths = dm.train_set.lengths
    bucketed_pad = padding_fraction(dm.train_batches(0), lengths)
    plain_pad = padding_fraction(unbucketed.train_batches(0), lengths)
    assert len(dm.train_batches(0)) == len(unbucketed.train_batches(0)) == 1053
    assert bucketed_pad < 0.1 < 0.5 < plain_pad  # measured: 0.026 vs 0.70


@needs_shared
def test_every_example_once_per_epoch_and_deterministic(dm):
    n = len(dm.train_set)
    epochs = [dm.train_batches(e) for e in range(3)]
    for batches in epochs:
        assert all_indices(batches) == list(range(n)) and len(batches) == 1053
    assert epochs[0] != epochs[1] != epochs[2]
    assert dm.train_batches(1) == epochs[1]  # a pure function of (seed, epoch)
    other = copy.copy(dm)
    other.seed = 7
    assert other.train_batches(0) != epochs[0]
    # the DataLoader yields epoch set_epoch(e), and iterating it does not touch the global RNG
    loader = dm.train_dataloader()
    loader.batch_sampler.set_epoch(2)
    state = torch.get_rng_state()
    seen = [b["index"].tolist() for b in loader]
    assert torch.equal(state, torch.get_rng_state())
    assert seen == epochs[2]


@needs_shared
def test_rank_sharding_partitions_batches(dm):
    for world in (2, 3):
        samplers = [EpochBatchSampler(dm.train_batches, r, world) for r in range(world)]
        for s in samplers:
            s.set_epoch(1)
        shards = [list(s) for s in samplers]
        assert len({len(s) for s in shards}) == 1 and all(len(s) == len(shards[0]) for s in samplers)
        full = dm.train_batches(1)
        kept = full[: len(full) // world * world]
        assert sorted(map(tuple, sum(shards, []))) == sorted(map(tuple, kept))  # disjoint and complete
        assert len(full) - len(kept) < world
    resumed = EpochBatchSampler(dm.train_batches, progress_fn=lambda: (1, 5))
    assert list(resumed) == dm.train_batches(1)[5:]


class Recorder(pl.LightningModule):
    """Records the example indices of every training batch, per epoch."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).append(batch["index"].tolist())
        return (self.w * batch["ids"].float().mean()).sum()

    def validation_step(self, batch, batch_idx):
        self.log("val", self.w.sum())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def fit(dm, root, max_epochs, validate, ckpt_path=None):
    """Fit a Recorder; checkpoints every 4 steps in root/steps and at each epoch end in root/epochs (at the
    end of validation when validating, else at the end of the training epoch)."""
    callbacks = [
        pl.callbacks.ModelCheckpoint(dirpath=root / "steps", save_top_k=-1, every_n_train_steps=4),
        pl.callbacks.ModelCheckpoint(dirpath=root / "epochs", save_top_k=-1),
    ]
    trainer = pl.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        limit_val_batches=2 if validate else 0,
        use_distributed_sampler=False,
    )
    module = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few-batch / no-val / non-resumable-loader warnings
        trainer.fit(module, datamodule=dm, ckpt_path=ckpt_path)
    return module.seen


@needs_shared
@pytest.mark.parametrize("num_workers, validate", [(0, False), (1, True)])
def test_lightning_epochs_and_resume(tmp_path, num_workers, validate):
    """Under a Trainer: epoch e is train_batches(e); resuming (at an epoch end or mid-epoch) repeats nothing."""
    dm = SST2(
        batch_size=32,
        vocab_size=300,
        limit=320,
        data_dir=str(tmp_path / "data"),
        mirror=str(SHARED_DATA),
        num_workers=num_workers,
    )
    full = fit(dm, tmp_path / "a", 2, validate)  # 10 batches per epoch
    assert full == {e: dm.train_batches(e) for e in (0, 1)}
    for e in (0, 1):
        assert all_indices(full[e]) == list(range(320))
    resumed = fit(dm, tmp_path / "b", 2, validate, ckpt_path=tmp_path / "a" / "epochs" / "epoch=0-step=10.ckpt")
    assert resumed == {1: full[1]}
    resumed = fit(dm, tmp_path / "c", 2, validate, ckpt_path=tmp_path / "a" / "steps" / "epoch=0-step=4.ckpt")
    assert resumed == {0: full[0][4:], 1: full[1]}


def write_sst2(root: Path, monkeypatch, train: str, dev: str = "good movie \t1\n", test: str = "bad \t0\n"):
    """Write sst2 files under root and register their checksums with the resolver."""
    for split, text in (("train", train), ("val", dev), ("test", test)):
        path = root / SPLITS[split]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        monkeypatch.setitem(resolver.FILES, SPLITS[split], hashlib.sha256(text.encode()).hexdigest())


def test_bad_label_names_file_line_and_value(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_sst2(data, monkeypatch, "a fine film \t1\nan awful film \t7\n")
    with pytest.raises(DataError) as e:
        SST2(vocab_size=100, data_dir=data).setup()
    msg = str(e.value)
    assert str(data / "sst2/sentiment-train") in msg and "line 2" in msg and "'7'" in msg
    write_sst2(data, monkeypatch, "a fine film \t1\n", dev="no tab here\n")
    with pytest.raises(DataError, match=r"sentiment-dev, line 1: expected"):
        SST2(vocab_size=100, data_dir=data).setup()


def test_blank_lines_skipped_and_counted(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_sst2(
        data,
        monkeypatch,
        "a fine film \t1\n\n   \nan awful film \t0\n \t1\nlong " + "word " * 20 + "\t1\n",
        dev="\r\na fine film \t1\r\n",
    )
    dm = SST2(vocab_size=100, max_len=8, batch_size=2, data_dir=data)
    dm.setup()
    assert dm.skipped == {"train": 3, "val": 1, "test": 0}
    assert len(dm.train_set) == 3 and dm.train_set.labels == [1, 0, 1]
    assert dm.truncated == {"train": 1, "val": 0, "test": 0}
    assert len(dm.train_set.ids[2]) == 8 and dm.train_set.ids[2][-1] == EOS_ID
    assert dm.tokenizer.decode(dm.val_set.ids[0]) == "a fine film"
    assert sorted(len(b["labels"]) for b in dm.train_dataloader()) == [1, 2]


def test_tokenizer_file_saved_and_reused(tmp_path, monkeypatch):
    data = tmp_path / "data"
    write_sst2(data, monkeypatch, "a fine film \t1\nan awful film \t0\n")
    path = tmp_path / "out" / "tokenizer.json"
    dm = SST2(vocab_size=40, tokenizer_path=str(path), data_dir=data)
    dm.setup()
    saved = dm.tokenizer.path  # tokenizer.<digest of the training texts and vocab_size>.json, next to path
    assert saved.is_file() and saved.parent == path.parent and saved.name.startswith("tokenizer.")
    again = SST2(vocab_size=40, tokenizer_path=str(path), data_dir=data)
    again.setup()
    assert again.tokenizer.path == saved and again.tokenizer.state_dict() == dm.tokenizer.state_dict()
    write_sst2(data, monkeypatch, "a dull film \t0\nan awful film \t0\na fine film \t1\n")
    other = SST2(vocab_size=40, tokenizer_path=str(path), data_dir=data)
    other.setup()  # other training texts: a tokenizer of their own, never the cached one
    assert other.tokenizer.path != saved and len(list(path.parent.glob("tokenizer.*.json"))) == 2
