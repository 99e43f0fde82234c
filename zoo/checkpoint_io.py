"""Atomic checkpoint writes: a crash mid-write never leaves a truncated checkpoint behind."""
import os
import tempfile
from pathlib import Path

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO


class AtomicCheckpointIO(TorchCheckpointIO):
    """Write the checkpoint to a temporary file in the same folder, fsync it, then os.replace() it onto
    the final name (atomic on POSIX). Checkpoints hold only tensors and plain Python data, so they
    load with torch.load(path, weights_only=True)."""

    def save_checkpoint(self, checkpoint, path, storage_options=None):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(checkpoint, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
