"""The Markdown section of the throughput benchmark (zoo.bench.throughput): the per-size table of zoo's loop
against the plain loops, the preset's total, and the torch.compile table."""

import torch

from zoo.bench.options import Options
from zoo.bench.report import fmt, markdown_table

COMPILE_HEADERS = ["size", "arch", "scope", "compile s", "eager ms", "compiled ms", "speed-up", "pays after"]
COMPILE_HEADERS += ["job steps", ""]


def throughput_text(
    rows: list[list], crows: list[list], study: list[float], jobs: int, opts: Options, warm: int, timed: int
) -> str:
    """The section: `rows` (size_rows' table rows), `crows` (compile_rows'), `study` (seconds of training steps
    over the preset's `jobs` jobs: zoo, plain, plain+k), timed over `timed` steps after `warm` untimed ones."""
    return "\n".join(
        [
            "## throughput: experiment=scaling's training loop vs a plain PyTorch loop",
            "",
            "Every size of conf/experiment/scaling.yaml, every architecture of the study; each size's batch of "
            f"128-token windows of the Shakespeare plays (char); fp32, {torch.get_num_threads()} threads. ms per "
            "training step and tokens/s: "
            f"median of {opts.reps} interleaved repetitions of {timed} steps after {warm} untimed "
            "(set-up excluded). plain: the loop a PyTorch user writes (PyTorch's own AdamW and clip_grad_norm_); "
            "plain+k: the same loop with zoo's kernels (torch's fused AdamW, which also applies zoo's gradient "
            "clip), so plain+k / zoo is the cost of zoo's loop alone "
            "(Lightning's hooks, logging, callbacks). plain / zoo = the plain loop's time over zoo's (>= 1: zoo "
            "not slower), with the repetitions zoo won.",
            "",
            markdown_table(
                ["size", "arch", "N non-emb", "zoo ms", "plain ms", "plain+k ms", "zoo tokens/s", "plain tokens/s"]
                + ["plain / zoo", "plain+k / zoo"],
                rows,
                label_columns=2,
            ),
            "",
            f"Over the preset's {jobs} jobs{' at these sizes' if opts.quick else ''} (each cell's trunk and "
            "cool-down steps, times its seeds), at these medians: training steps take zoo "
            f"{fmt(study[0])} s, plain {fmt(study[1])} s (plain / zoo {study[1] / study[0]:.3f}), plain+k "
            f"{fmt(study[2])} s (plain+k / zoo {study[2] / study[0]:.3f}).",
            "",
            "torch.compile (model.compile=true), decoder_only, one run per scope: the compile cost is the time "
            f"from fit start to step {warm} beyond the eager run's (median); it pays when it is repaid "
            "within the job's own steps (experiment=scaling's trainer.max_steps).",
            "",
            markdown_table(
                COMPILE_HEADERS,
                crows,
                label_columns=3,
            ),
        ]
    )
