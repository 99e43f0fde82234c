"""Peak memory of each contender's training step (train_step and seq2seq_step), one fresh process each.

A contender's peak is measured in its own `python -c` process (zoo.bench.memory.run_child): build it at the
shape (zoo.bench.comparison.comparison), take one training step so that the model, its AdamW state and the
allocator are in their steady state, then measure one more step with zoo.bench.memory.peak_growth. Two
numbers: the step's peak growth over that state (activations, gradients, logits and the loss's own buffers:
what differs between implementations with the same parameters) and the process's high-water mark (VmHWM on
CPU; torch.cuda.max_memory_allocated on cuda), which adds the weights, AdamW state and the interpreter.
"""

import json

import torch

from zoo.bench.comparison import comparison
from zoo.bench.contenders import training_steps
from zoo.bench.memory import _hwm_bytes, peak_growth, run_child
from zoo.bench.report import progress

STEP_MEMORY_NOTE = (
    "\nPeak memory: each contender alone in a fresh process after one warm-up step; step peak = the growth of "
    "one training step over the model + AdamW state (activations, gradients, logits), process peak = the "
    "whole process's high-water mark (zoo.bench.step_memory)."
)


def step_peak(kind: str, shape: str, name: str, device: str = "cpu", precision: str = "fp32") -> dict:
    """In this process: {"peak_bytes": step peak growth, "process_bytes": high-water mark, "method"} of the
    contender `name` of comparison(kind, shape) (kind lm | seq2seq). Raises ValueError for an unknown name."""
    _, contenders, inputs, targets = comparison(kind, shape, device)
    chosen = [c for c in contenders if c.name == name]
    if not chosen:
        raise ValueError(f"no contender {name!r} at {kind} {shape}; known: {', '.join(c.name for c in contenders)}")
    steps, _, _, missing = training_steps(chosen, inputs, targets, precision, device)
    if missing:
        raise ValueError(f"{name}: {missing[name]}")
    step = steps[name]
    step()  # AdamW state allocated, allocator warm
    peak, method = peak_growth(step, device, repeats=1)
    process = torch.cuda.max_memory_allocated() if device == "cuda" else _hwm_bytes()
    return {"peak_bytes": peak, "process_bytes": process, "method": method}


def step_peak_child(kind: str, shape: str, name: str, device: str, precision: str, threads: int) -> None:
    """step_peak inside a fresh process; prints its dict as one JSON line."""
    if threads:
        torch.set_num_threads(threads)
    print(json.dumps(step_peak(kind, shape, name, device, precision)))


def step_peaks(kind: str, shape: str, names, device: str = "cpu", precision: str = "fp32") -> dict[str, dict]:
    """{name: step_peak's dict} for each contender name, each in a fresh subprocess (run_child). Raises
    RuntimeError naming the contender whose process failed."""
    out = {}
    for name in names:
        progress(f"{kind} {shape}: peak memory of {name}")
        code = (
            "from zoo.bench.step_memory import step_peak_child; "
            f"step_peak_child({kind!r}, {shape!r}, {name!r}, {device!r}, {precision!r}, {torch.get_num_threads()})"
        )
        out[name] = run_child(code, f"step memory child ({name})")
    return out
