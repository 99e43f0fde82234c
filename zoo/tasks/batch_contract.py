"""The check of a batch against its task's BATCH_CONTRACT ({key: (dtype, ndim)} for dict batches, a tuple of
(dtype, ndim) for tuples), run on the first training batch (zoo.tasks.base.TaskBase.on_train_batch_start)."""

import torch


def check_batch(task, batch) -> None:
    """Raise ValueError naming the datamodule, the key and what was expected when `batch` breaks the task's
    BATCH_CONTRACT (a missing key, another dtype or number of dimensions). task: a zoo.tasks.base.TaskBase."""
    source = type(getattr(task.trainer, "datamodule", None)).__name__ if task._trainer is not None else "the data"
    contract = task.BATCH_CONTRACT
    if isinstance(contract, dict):
        if not isinstance(batch, dict):
            raise ValueError(
                f"{type(task).__name__} reads dict batches with keys {', '.join(contract)}, but "
                f"{source} gives {type(batch).__name__} batches"
            )
        items = [(f"batch[{k!r}]", batch.get(k), want) for k, want in contract.items()]
    else:
        if not isinstance(batch, (tuple, list)) or len(batch) != len(contract):
            raise ValueError(
                f"{type(task).__name__} reads batches of {len(contract)} tensors (x, y), but "
                f"{source} gives {type(batch).__name__} batches"
            )
        items = [(f"batch[{i}]", t, want) for i, (t, want) in enumerate(zip(batch, contract))]
    for name, t, (dtype, ndim) in items:
        if not isinstance(t, torch.Tensor) or t.dtype != dtype or t.dim() != ndim:
            got = (
                "missing"
                if t is None
                else (f"{t.dtype} with {t.dim()} dims" if isinstance(t, torch.Tensor) else type(t).__name__)
            )
            raise ValueError(
                f"{type(task).__name__} needs {name} as {dtype} with {ndim} dims, but {source} "
                f"gives {got}; see {type(task).__name__}'s docstring for the batch it reads"
            )
