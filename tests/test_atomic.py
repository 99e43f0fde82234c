"""Atomic writes (zoo.data.atomic): every file zoo writes through a temporary file gets the mode open() would give
it, 0o666 & ~umask (results.json, checkpoints, token files, tokenizers, downloads), and a failed write leaves
neither the file nor its temporary."""

import hashlib
import json
import os
import stat

import pytest
import torch

from zoo.data.atomic import atomic_file
from zoo.data.bpe import load_or_train
from zoo.data.download import download
from zoo.data.token_file import sidecar, write_token_file
from zoo.run.results import write_json
from zoo.training.checkpoint_io import AtomicCheckpointIO


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request):
    """The process umask for the test (restored after it)."""
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def plain_open_mode(tmp_path) -> int:
    """The mode a file written with open() gets under the current umask (the reference)."""
    ref = tmp_path / "reference.txt"
    with open(ref, "w") as f:
        f.write("x")
    return mode(ref)


def test_every_atomic_write_gets_the_mode_open_gives(tmp_path, umask):
    want = plain_open_mode(tmp_path)
    assert want == 0o666 & ~umask
    written = [write_json(tmp_path / "run" / "results.json", {"status": "ok"})]
    AtomicCheckpointIO().save_checkpoint({"w": torch.ones(2)}, tmp_path / "run" / "checkpoints" / "last.ckpt")
    written.append(tmp_path / "run" / "checkpoints" / "last.ckpt")
    tokens = write_token_file(tmp_path / "tokens" / "t.bin", [[1, 2, 3]], vocab_size=10)
    written += [tokens.path, sidecar(tokens.path)]
    load_or_train(tmp_path / "tok" / "tokenizer.json", lambda: ["ab ba", "abba"], 40, chars=True)
    written.append(tmp_path / "tok" / "tokenizer.json")
    source = tmp_path / "source.txt"
    source.write_bytes(b"some published data\n")
    dest = tmp_path / "data" / "file.txt"
    download(source.as_uri(), dest, "file", hashlib.sha256(source.read_bytes()).hexdigest(), False, 5.0)
    written.append(dest)
    assert {str(p.relative_to(tmp_path)): oct(mode(p)) for p in written} == {
        str(p.relative_to(tmp_path)): oct(want) for p in written
    }
    assert json.loads((tmp_path / "run" / "results.json").read_text()) == {"status": "ok"}
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no temporary left


def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old")
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_file(path, "w") as f:
            f.write("half")
            raise RuntimeError("disk full")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
