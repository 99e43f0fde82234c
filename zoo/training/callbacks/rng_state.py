"""Save and restore every random number generator with the checkpoint, so a resumed run draws the
same dropout masks and data as an uninterrupted one."""

import random

import lightning.pytorch as pl
import numpy as np
import torch


class RNGState(pl.Callback):
    """Stores the python, numpy, torch CPU and CUDA generator states in checkpoint["rng_state"] as
    tensors and plain data (loadable with torch.load(weights_only=True)), and restores them on resume."""

    def state_dict(self):
        kind, keys, pos, has_gauss, gauss = np.random.get_state()
        state = {
            "python": random.getstate(),
            "torch": torch.get_rng_state(),
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        }
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state):
        random.setstate((state["python"][0], tuple(state["python"][1]), state["python"][2]))
        torch.set_rng_state(state["torch"])
        kind, keys, pos, has_gauss, gauss = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
