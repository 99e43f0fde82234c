"""zoo.training.checkpoint_file.read_checkpoint_file: a file a user names as a checkpoint is read safely, and
any other file is refused with the path, what it is not, and the fix."""

import argparse
import shutil

import pytest
import torch
from zoo_run import SHARED_DATA, needs_shared

from zoo.training.checkpoint_file import read_checkpoint_file

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
