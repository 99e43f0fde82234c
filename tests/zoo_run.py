"""Helpers for tests that run zoo's main job: compose configs in-process, or run `python -m zoo`."""
import os
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from zoo.train import CONF_DIR

REPO = Path(__file__).resolve().parents[1]
# a small, fast decoder-only run on the real Tiny Shakespeare
TINY = ["model.d_model=32", "model.n_heads=2", "model.d_ff=64", "model.n_layers=2", "model.max_len=64",
        "data.block_size=32", "data.batch_size=8", "data.batches_per_epoch=5", "data.val_windows=16",
        "trainer.max_steps=10", "task.sample.max_new_tokens=16", "trainer.enable_model_summary=false"]


def make_cfg(tmp_path, overrides, arch="decoder_only"):
    """The composed config of `python -m zoo +arch=<arch> <overrides>`, writing into tmp_path."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose("config", overrides=[f"+arch={arch}", *overrides], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp_path)
        del cfg["hydra"]  # as in a real run: the job's config has no hydra node
    return cfg


def run_cli(args, cwd, timeout=600, env=None):
    """Run `python -m zoo <args>` in a fresh process; returns CompletedProcess (text)."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "HYDRA_FULL_ERROR": "0", **(env or {})}
    return subprocess.run([sys.executable, "-m", "zoo", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
