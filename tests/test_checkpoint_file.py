"""zoo.model.checkpoint_file: a file a user names as a checkpoint is read safely, and any other file is refused
with the path, what it is not, and the fix; a run directory names its checkpoint."""

import argparse
import json
import os
import shutil

import pytest
import torch
from zoo_run import SHARED_DATA, needs_shared

from zoo.model.checkpoint_file import read_checkpoint_file, run_checkpoint

FIX = "use a .ckpt from a run's checkpoints/ dir"


def test_a_checkpoint_dict_is_read(tmp_path):
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": {"w": torch.arange(3.0)}, "hyper_parameters": {"arch": "decoder_only"}}, path)
    ckpt = read_checkpoint_file(path, FIX)
    assert (
        torch.equal(ckpt["state_dict"]["w"], torch.arange(3.0)) and ckpt["hyper_parameters"]["arch"] == "decoder_only"
    )


@needs_shared
def test_a_csv_is_refused_in_zoos_words(tmp_path):
    """The Chinchilla points CSV passed as a checkpoint: the unpickler's own words (Unsupported operand 120, and
    advice to load it unsafely) are not shown; the message says it is not a file torch.save wrote, and the fix."""
    path = tmp_path / "points.ckpt"
    shutil.copy(SHARED_DATA / "chinchilla_epoch" / "svg_extracted_data.csv", path)
    with pytest.raises(ValueError) as e:
        read_checkpoint_file(path, FIX)
    assert (
        str(e.value)
        == f"{path} is not a readable checkpoint: it is not a file torch.save wrote, or it is truncated; {FIX}"
    )


def test_a_truncated_checkpoint_and_foreign_objects_are_refused(tmp_path):
    """Half of a real checkpoint; a checkpoint holding an object of a class outside plain data (weights_only
    refuses it; the message names the class); a file holding a tensor rather than a checkpoint's dict. Each in
    the caller's error type."""
    whole = tmp_path / "whole.ckpt"
    torch.save({"state_dict": {"w": torch.zeros(1000)}}, whole)
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(KeyError, match="not a file torch.save wrote, or it is truncated"):
        read_checkpoint_file(cut, FIX, KeyError)
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"args": argparse.Namespace(lr=1e-3)}, foreign)
    with pytest.raises(
        ValueError, match=r"checkpoint: it holds an object of class argparse\.Namespace, not only tensors and plain"
    ):
        read_checkpoint_file(foreign, FIX)
    tensor = tmp_path / "tensor.ckpt"
    torch.save(torch.zeros(2), tensor)
    with pytest.raises(ValueError, match=r"it holds a Tensor, not a dict; use a \.ckpt"):
        read_checkpoint_file(tensor, FIX)


def test_a_run_directory_names_its_best_else_last_else_newest_checkpoint(tmp_path):
    """run_checkpoint: a file is itself; a run directory gives results.json's best_checkpoint, else
    checkpoints/last.ckpt, else the newest checkpoints/*.ckpt; a missing path, a directory without checkpoints
    (naming the runs below a multirun directory) and a results.json that is not JSON raise the given error."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    for i, name in enumerate(("epoch=0-step=5.ckpt", "epoch=0-step=9.ckpt")):
        (run / "checkpoints" / name).write_bytes(b"")
        os.utime(run / "checkpoints" / name, (1_000_000 + i, 1_000_000 + i))
    path, why = run_checkpoint(run)
    assert path == run / "checkpoints" / "epoch=0-step=9.ckpt" and "newest" in why
    (run / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert run_checkpoint(run)[0] == run / "checkpoints" / "last.ckpt"
    (run / "results.json").write_text(json.dumps({"best_checkpoint": "/moved/checkpoints/epoch=0-step=5.ckpt"}))
    assert run_checkpoint(run) == (run / "checkpoints" / "epoch=0-step=5.ckpt", "results.json's best_checkpoint")
    assert run_checkpoint(run / "checkpoints" / "last.ckpt")[1] == "the checkpoint given"
    with pytest.raises(KeyError, match="does not exist; pass a run's directory"):
        run_checkpoint(tmp_path / "nope", KeyError)
    (run / "results.json").write_text("{cut")
    with pytest.raises(FileNotFoundError, match="is not a run's results.json"):
        run_checkpoint(run)
    multirun = tmp_path / "multirun"
    for job in ("0", "1"):
        (multirun / job).mkdir(parents=True)
        (multirun / job / "results.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="holds no checkpoint .* it holds the runs 0, 1: pass one"):
        run_checkpoint(multirun)
