"""One comparison by name, as the train_step / seq2seq_step benchmarks build it: its shape, contenders, inputs
and targets (for the experiments/bench_scripts)."""

from zoo.bench.lm_contenders import lm_batch, lm_contenders
from zoo.bench.seq2seq_contenders import seq2seq_batch, seq2seq_contenders
from zoo.bench.shapes import LM_SHAPES, SEQ2SEQ_SHAPES


def comparison(kind: str, shape: str, device: str = "cpu"):
    """kind 'lm' or 'seq2seq' and a shape name of zoo.bench.shapes -> (the shape, its contenders, inputs,
    targets), as the train_step / seq2seq_step benchmarks build them (for the experiments/bench_scripts).
    Raises ValueError for an unknown kind or shape name."""
    shapes = {"lm": LM_SHAPES, "seq2seq": SEQ2SEQ_SHAPES}.get(kind)
    if shapes is None or shape not in shapes:
        known = ", ".join(shapes) if shapes else "lm, seq2seq"
        raise ValueError(f"unknown {'shape ' + repr(shape) if shapes else 'kind ' + repr(kind)}; known: {known}")
    s = shapes[shape]
    if kind == "lm":
        return (s, lm_contenders(s), *lm_batch(s, device))
    return (s, seq2seq_contenders(s), *seq2seq_batch(s, device))
