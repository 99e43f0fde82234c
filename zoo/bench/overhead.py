"""Benchmark 5: the nanoGPT CPU recipe under zoo's Lightning loop vs a plain PyTorch loop."""

import contextlib
import logging
import time
import warnings

from zoo.bench.options import Options
from zoo.bench.recipe import (
    BATCH,
    BLOCK,
    NANOGPT_MODEL,
    NANOGPT_OPTIMIZER,
    fresh,
    plain_run,
    scheduler_config,
    shakespeare,
)
from zoo.bench.report import fmt, markdown_table, progress
from zoo.bench.timing import Timed, interleaved, median, sync

WARMUP_STEPS = 10  # steps of each overhead warm-up run


@contextlib.contextmanager
def quiet_lightning():
    """Silence Lightning's info logs and its advisory warnings (num_workers, etc.) inside the block."""
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric", "lightning")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, lv in zip(loggers, levels):
            lg.setLevel(lv)


def lightning_run(prepared, K: int, device: str, model_cfg: dict) -> float:
    """Seconds of K steps of zoo.tasks.lm.LanguageModeling under a minimal pl.Trainer (construction + fit) on a
    fresh copy of the prepared datamodule. Raises RuntimeError when the Trainer did not run exactly K steps."""
    import lightning.pytorch as pl
    import torch

    from zoo.tasks.lm import LanguageModeling

    torch.manual_seed(0)
    dm = fresh(prepared)
    task = LanguageModeling(
        "decoder_only", model_cfg, dm.tokenizer.state_dict(), dict(NANOGPT_OPTIMIZER), scheduler_config(K), sample=None
    )
    with quiet_lightning():
        sync(device)
        t0 = time.perf_counter()
        trainer = pl.Trainer(
            accelerator="gpu" if device == "cuda" else "cpu",
            devices=1,
            max_steps=K,
            gradient_clip_val=1.0,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            log_every_n_steps=50,
            limit_val_batches=0,
            num_sanity_val_steps=0,
        )
        trainer.fit(task, datamodule=dm)
        sync(device)
        elapsed = time.perf_counter() - t0
    if trainer.global_step != K:
        raise RuntimeError(f"Lightning ran {trainer.global_step} steps, expected {K}")
    return elapsed


def bench_overhead(opts: Options) -> str:
    """The nanoGPT CPU recipe (4/4/128, block 64, batch 12; AdamW lr 1e-3 betas (0.9, 0.99) wd 0.1,
    warmup-cosine schedule, grad-norm clip 1.0) for K steps (QUICK: 50, full: 300), on zoo's
    TinyShakespeare datamodule, two ways:
      plain: zoo.bench.recipe.plain_run (next batch, forward, fp32 cross-entropy, backward,
        clip_grad_norm_, AdamW step, scheduler step, zero_grad(set_to_none=True));
      Lightning: pl.Trainer(max_steps=K, gradient_clip_val=1.0, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=50, limit_val_batches=0,
        num_sanity_val_steps=0).fit(zoo.tasks.lm.LanguageModeling) (its per-step self.log calls included).
    Timed: plain = the loop; Lightning = Trainer construction + fit. Model and data set-up (reading and
    tokenising the text) are outside both. overhead % = Lightning / plain - 1 (median seconds).
    Warm-up: WARMUP_STEPS-step runs of each (a full K-step warm-up would double the cost for nothing).
    """
    K = 50 if opts.quick else 300
    prepared = shakespeare()
    vocab = prepared.vocab_size
    model_cfg = dict(NANOGPT_MODEL, vocab_size=vocab)

    def plain(K: int = K):
        return Timed(plain_run(prepared, K, opts.device)[0])

    def lightning(K: int = K):
        return Timed(lightning_run(prepared, K, opts.device, model_cfg))

    progress(f"overhead K={K}")
    for _ in range(opts.warmup):  # warm-up: a short run of each (kernels, allocator, Lightning's imports)
        plain(WARMUP_STEPS)
        lightning(WARMUP_STEPS)
    times = interleaved({"plain PyTorch loop": plain, "Lightning Trainer": lightning}, opts.reps, 0, opts.device)
    tokens = K * BATCH * BLOCK
    p, lt = median(times["plain PyTorch loop"]), median(times["Lightning Trainer"])
    rows = [
        [name, fmt(median(ts)), f"{fmt(min(ts))}–{fmt(max(ts))}", fmt(1e3 * median(ts) / K), fmt(tokens / median(ts))]
        for name, ts in times.items()
    ]
    return "\n".join(
        [
            "## overhead: plain PyTorch loop vs Lightning Trainer (nanoGPT CPU recipe)",
            "",
            f"{K} steps of 4 layers, 4 heads, d_model 128, block {BLOCK}, batch {BATCH}, vocab {vocab} "
            "(TinyShakespeare), AdamW + warmup-cosine + grad clip 1.0, fp32. Seconds per K-step run (median of "
            f"{opts.reps}, interleaved, after {opts.warmup} warm-up run(s) of {WARMUP_STEPS} steps each).",
            "",
            markdown_table(["loop", "s (median)", "s (min–max)", "ms/step", "tokens/s"], rows),
            "",
            f"Lightning overhead: {100 * (lt / p - 1):+.1f}% (Lightning / plain - 1; goal <= +10%; includes Trainer "
            "construction and fit set-up, amortised over the K steps).",
        ]
    )
