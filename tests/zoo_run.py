"""Helpers shared by tests: compose zoo's main job's configs in-process or run `python -m zoo`; the override lists
and ModelConfigs of tiny models; the shared datasets (../shared/data: a skip mark, SST-2 rows, Multi30k lines,
Tiny Shakespeare's text and data module); toy reversal pairs and their tokenizer; FlopCounterMode's count of a
function. Fixtures are in conftest.py."""

import gzip
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import SHARED_DATA
from torch.ops import aten
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

from zoo.data.bpe import SubwordTokenizer, train_bpe
from zoo.data.shakespeare import TinyShakespeare
from zoo.model import ModelConfig
from zoo.run.job import compose_job

REPO = Path(__file__).resolve().parents[1]
# a small, fast decoder-only run on the real Tiny Shakespeare
TINY = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.d_ff=64",
    "model.n_layers=2",
    "model.max_len=64",
    "data.block_size=32",
    "data.batch_size=8",
    "data.batches_per_epoch=5",
    "data.val_windows=16",
    "trainer.max_steps=10",
    "task.sample.max_new_tokens=16",
    "trainer.enable_model_summary=false",
]
# the one-layer model of many runs' overrides (each file adds its run's settings)
TINY_MODEL = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_layers=1"]
# ... with a 128-token context, a CSV log and no model summary: runs on the users' / pretrained tokenizers' data
SMALL_MODEL = [*TINY_MODEL, "model.max_len=128", "trainer.enable_model_summary=false", "logger=csv"]
# ... a 12-step run with a CSV log and no model summary (each task's preset data)
SHORT_RUN = [*TINY_MODEL, "logger=csv", "trainer.enable_model_summary=false", "trainer.max_steps=12"]

# a tiny in-process model: two layers of width 32, four heads, no dropout, 32 positions, 50 token ids
TINY_CONFIG = dict(vocab_size=50, d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0, max_len=32)


def tiny_config(**kw) -> ModelConfig:
    """ModelConfig of TINY_CONFIG with kw replacing or adding fields."""
    return ModelConfig(**{**TINY_CONFIG, **kw})


def tokens(B, T, seed=1, vocab=TINY_CONFIG["vocab_size"]):
    """(B, T) random ids 3..vocab-1 (no special id 0..2), from their own generator."""
    return torch.randint(3, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def make_cfg(tmp_path, overrides, arch="decoder_only"):
    """The composed config of `python -m zoo +arch=<arch> <overrides>`, writing into tmp_path."""
    return compose_job([f"+arch={arch}", *overrides], tmp_path)


def run_cli(args, cwd, timeout=600, env=None):
    """Run `python -m zoo <args>` in a fresh process; returns CompletedProcess (text)."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "zoo", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


# tests that read the shared datasets are skipped where ../shared/data is missing (conftest's shared_data
# fixture skips the same way)
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"{SHARED_DATA} not available")
SST2_FILES = {"train": "sentiment-train", "val": "sentiment-dev", "test": "sentiment-test"}


def sst2_rows(split: str, n: int) -> list[tuple[str, str]]:
    """The first n (text, label) rows, stripped, of the shared SST-2 split: train | val | test, or the file's
    name (sentiment-train, sentiment-dev, sentiment-test)."""
    rows = []
    with open(SHARED_DATA / "sst2" / SST2_FILES.get(split, split), encoding="utf-8") as f:
        for line in f:
            text, _, label = line.rstrip("\n").rpartition("\t")
            rows.append((text.strip(), label.strip()))
            if len(rows) == n:
                break
    return rows


def multi30k_lines(split: str, lang: str, n: int) -> list[str]:
    """The first n lines, each with its newline, of the shared Multi30k file <split>.<lang>.gz."""
    with gzip.open(SHARED_DATA / "multi30k" / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
        return [next(f) for _ in range(n)]


def multi30k_pairs(split: str, n: int) -> list[tuple[str, str]]:
    """The first n (German, English) pairs of a shared Multi30k split, without their newlines."""
    de, en = ([line.rstrip("\n") for line in multi30k_lines(split, lang, n)] for lang in ("de", "en"))
    return list(zip(de, en))


def shakespeare_text(n: int | None = None) -> str:
    """The shared Tiny Shakespeare text (tiny_shakespeare/input.txt), its first n characters if n is given."""
    return (SHARED_DATA / "tiny_shakespeare" / "input.txt").read_text(encoding="utf-8")[:n]


def shakespeare_dm(tmp_path, **kw) -> TinyShakespeare:
    """A set-up TinyShakespeare (kw: its arguments) reading the shared file, writing under tmp_path/data."""
    dm = TinyShakespeare(**{"data_dir": tmp_path / "data", "mirror": str(SHARED_DATA), **kw})
    dm.setup()
    return dm


def all_indices(batches):
    """The dataset indices of a list of batches (each a list of indices), sorted."""
    return sorted(i for b in batches for i in b)


def reversal_tokenizer() -> dict:
    """The state_dict of a 30-id SubwordTokenizer trained on two toy sentences (for reversal_pairs' tasks)."""
    return SubwordTokenizer(train_bpe(["ein hund läuft", "a dog runs"], 30)).state_dict()


def reversal_pairs(n: int = 16, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """n toy (source ids, target ids) pairs, target = reversed source: lengths 3..8 of tokens 6..29, drawn from
    their own generator (the global RNG is left alone)."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        s = torch.randint(6, 30, (int(torch.randint(3, 9, (1,), generator=g)),), generator=g).tolist()
        pairs.append((s, s[::-1]))
    return pairs


CPU_SDPA = aten._scaled_dot_product_flash_attention_for_cpu


def counted_flops(fn):
    """FlopCounterMode's total for fn(), CPU SDPA counted with torch's own formula (as tests/test_cost.py)."""
    mapping = {CPU_SDPA: lambda q, k, v, *a, **kw: sdpa_flop_count(q, k, v)}
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as fc:
        fn()
    return fc.get_total_flops()


def bench_script(name: str):
    """experiments/bench_scripts/<name>.py, loaded as a module (the scripts are not a package)."""
    path = Path(__file__).resolve().parents[1] / "experiments" / "bench_scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
