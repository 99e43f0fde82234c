"""The options every benchmark receives (set by zoo.bench.cli from the command line)."""

from dataclasses import dataclass


@dataclass
class Options:
    """quick: the short mode (smaller shapes, fewer steps). device: cpu | cuda. precision: fp32 | bf16
    (train_step's forward passes). reps: timed repetitions (the median is reported, >= 5). warmup: untimed
    rounds before them. shapes: train_step / precision shape names (None = the mode's default). compile:
    train_step / seq2seq_step run every contender as torch.compile(model). step_memory: train_step /
    seq2seq_step also measure each contender's peak memory, each in a fresh process (zoo.bench.step_memory;
    not with compile)."""

    quick: bool = False
    device: str = "cpu"
    precision: str = "fp32"
    reps: int = 7
    warmup: int = 2
    shapes: list[str] | None = None
    compile: bool = False
    step_memory: bool = False
