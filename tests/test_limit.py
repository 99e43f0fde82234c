"""data.limit and debug=limit: every task's data keeps the first N examples of each split (train, val, test)."""

import pytest
from conftest import SHARED_DATA
from zoo_run import make_cfg, multi30k_pairs, needs_shared, shakespeare_dm, sst2_rows

from zoo.data.bible import BibleEnEs
from zoo.data.multi30k import Multi30k
from zoo.data.sst2 import SST2
from zoo.errors import ConfigError
from zoo.run.checks.config import check_config

pytestmark = needs_shared
N = 5


def common(tmp_path, **kw):
    return dict(data_dir=str(tmp_path / "data"), mirror=str(SHARED_DATA), **kw)


@pytest.mark.parametrize("arch, data", [("encoder_only", "sst2"), ("decoder_only", None), ("encoder_decoder", None)])
def test_debug_limit_composes_for_every_tasks_data(tmp_path, arch, data):
    """debug=limit on each arch's own data (classification, LM, translation) passes the run's checks, with a
    limit of 64 examples a split and 20 steps."""
    cfg = make_cfg(tmp_path, ["debug=limit", *([f"data={data}"] if data else [])], arch=arch)
    check_config(cfg)
    assert cfg.data.limit == 64 and cfg.trainer.max_steps == 20 and cfg.trainer.max_epochs == -1


def test_sst2_keeps_the_first_n_sentences_of_each_file(tmp_path):
    data = SST2(limit=N, **common(tmp_path)).read()
    for split in ("train", "val", "test"):
        assert [(e.text, str(e.label)) for e in data[split]] == sst2_rows(split, N), split


def test_multi30k_keeps_the_first_n_pairs_of_each_file(tmp_path):
    data = Multi30k(limit=N, **common(tmp_path)).read()
    for split, name in (("train", "train"), ("val", "val"), ("test", "test_2016_flickr")):
        assert list(zip(*data[split])) == multi30k_pairs(name, N), split


def test_bible_keeps_the_first_n_pairs_of_each_split(tmp_path):
    whole = BibleEnEs(**common(tmp_path)).read()
    data = BibleEnEs(limit=N, **common(tmp_path)).read()
    for split in ("train", "val", "test"):
        assert list(zip(*data[split])) == list(zip(*whole[split]))[:N], split


def test_an_lm_reads_the_first_n_windows_of_text_and_validates_on_n(tmp_path):
    """An LM's example is a window of block_size + 1 tokens: training windows come from the first
    N x block_size + 1 tokens of the training text, and validation scores N windows (fewer than val_windows)."""
    whole = shakespeare_dm(tmp_path, block_size=8, val_windows=64)
    dm = shakespeare_dm(tmp_path, block_size=8, val_windows=64, limit=N)
    assert len(dm.train_data) == N * 8 + 1
    assert dm.train_data.windows([0], N * 8 + 1)[0].tolist() == whole.train_data.windows([0], N * 8 + 1)[0].tolist()
    assert len(dm.val_set) == N and len(whole.val_set) == 64
    assert all(0 <= dm.train_set.start(i) <= N * 8 - 8 for i in range(100))


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_a_limit_that_is_not_a_positive_count_is_refused(tmp_path, bad):
    with pytest.raises(ConfigError, match=rf"data.limit={bad!r} must be a positive integer"):
        check_config(make_cfg(tmp_path, [f"data.limit={bad}"], arch="decoder_only"))
