"""Finding and reading the checkpoint a user names (zoo.generate, zoo.translate, zoo.convert, model.init_from,
a run's ckpt_path): a .ckpt file or a run directory, read safely, with an error that says what the path is not and
what to pass instead. Imports no Lightning, so the command-line tools start fast."""

import json
import os
import re
from pathlib import Path

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


def run_checkpoint(path, error: type[Exception] = FileNotFoundError) -> tuple[Path, str]:
    """The checkpoint that `path` names and why: a file itself; a run directory's results.json best_checkpoint
    (looked up in its checkpoints/ folder too, for a run directory that moved), else checkpoints/last.ckpt, else
    the newest checkpoints/*.ckpt. Raises `error` naming what was looked for: a path that does not exist, a
    results.json that is not a run's, or a directory without a checkpoint (listing the runs below it when it
    is a multirun's directory)."""
    p = Path(path).expanduser()
    if p.is_file():
        return p, "the checkpoint given"
    if not p.is_dir():
        raise error(
            f"{path} does not exist; pass a run's directory (it holds results.json and checkpoints/) or one of "
            f"its checkpoints/*.ckpt"
        )
    best = None
    if (p / "results.json").is_file():
        try:
            best = json.loads((p / "results.json").read_text(encoding="utf-8")).get("best_checkpoint")
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
            raise error(
                f"{p / 'results.json'} is not a run's results.json ({e}); pass one of the run's checkpoints/*.ckpt"
            ) from None
    if best:
        for cand in (Path(best), p / "checkpoints" / Path(best).name):
            if cand.is_file():
                return cand, "results.json's best_checkpoint"
    why = "results.json names no best_checkpoint" if not best else f"results.json's best_checkpoint {best} is gone"
    last = p / "checkpoints" / "last.ckpt"
    if last.is_file():
        return last, f"checkpoints/last.ckpt, the final weights ({why})"
    saved = sorted((p / "checkpoints").glob("*.ckpt"), key=os.path.getmtime, reverse=True)
    if saved:
        return saved[0], f"the newest of checkpoints/*.ckpt ({why}, and there is no last.ckpt)"
    runs = sorted(q.parent.name for q in p.glob("*/results.json"))
    raise error(
        f"{p} holds no checkpoint (results.json's best_checkpoint, checkpoints/last.ckpt or checkpoints/*.ckpt)"
        + (f"; it holds the runs {', '.join(runs[:8])}{' ...' if len(runs) > 8 else ''}: pass one" if runs else "")
        + "; pass a run's directory or a .ckpt file"
    )
