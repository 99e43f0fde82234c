"""Reading a checkpoint file a user names (zoo.generate, zoo.translate, a run's ckpt_path), with an error that
says what the file is not and what to pass instead. Imports no Lightning, so the command-line tools start fast."""

import re

import torch


def read_checkpoint_file(path, fix: str, error: type[Exception] = ValueError) -> dict:
    """torch.load(path, map_location="cpu", weights_only=True) of an existing file, on the CPU so that only the
    file can fail here (the caller moves what it builds): zoo's checkpoints hold only tensors and plain Python
    data. Raises `error` with `path`, what went wrong and `fix` (what to pass instead) when torch.load cannot
    read it (a truncated file, or another format: a CSV, a text file, a NumPy array) or when it holds
    something other than a checkpoint's dict."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # not a zip archive nor a pickle, truncated, or objects outside plain data
        found = re.search(r"Unsupported global: GLOBAL (\S+)", str(e))
        what = (
            f"it holds an object of class {found.group(1)}, not only tensors and plain data"
            if found
            else "it is not a file torch.save wrote, or it is truncated"
        )
        raise error(f"{path} is not a readable checkpoint: {what}; {fix}") from None
    if not isinstance(ckpt, dict):
        raise error(f"{path} is not a readable checkpoint: it holds a {type(ckpt).__name__}, not a dict; {fix}")
    return ckpt
