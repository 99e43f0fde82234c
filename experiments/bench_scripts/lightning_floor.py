"""What Lightning's loop costs per step by itself, and what zoo's run configuration adds (issue 28,
experiments/RESULTS.md "Scaling"). At a micro size (d_model 8, 2 layers, batch 2 x 16 tokens) a step is a few
milliseconds of per-op work, so the loop's own costs stand out of the timing noise; median microseconds per
step over 200 steps after 20, 5 interleaved repetitions (zoo.bench.timing.interleaved):

    python experiments/bench_scripts/lightning_floor.py [--arch decoder_only]

Contenders, all on the same zoo task, data and schedule:
  zoo          the Trainer zoo.run.train builds for an experiment=scaling job (loggers, callbacks, progress bar)
  zoo, no loggers        the same without its loggers
  zoo, no callbacks      the same without its callbacks (progress bar kept)
  Lightning    a bare lightning.pytorch.Trainer: no loggers, callbacks, progress bar, checkpointing or summary
  plain+k      zoo.bench.throughput.plain_run(fused=None): a plain loop with zoo's kernels
  plain        zoo.bench.throughput.plain_run(fused=False): a plain loop with PyTorch's AdamW and clip_grad_norm_
"""

import argparse
import copy
import statistics
import sys
import tempfile

import lightning.pytorch as pl
from omegaconf import open_dict

from zoo.bench import throughput as T
from zoo.bench.overhead import quiet_lightning
from zoo.bench.timing import Timed, interleaved

WARM, STEPS = 20, 200
MICRO = ("scaling.block_size=16", "scaling.batch_size=2", "model.d_model=8", "model.n_heads=1", "model.n_layers=2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="decoder_only", choices=T.ARCHS)
    args = parser.parse_args()
    T.WARM_STEPS, T.TIMED_STEPS = WARM, STEPS
    build = T.build_trainer
    keep = {"callbacks": True}

    def trainer(cfg, tags):
        tr, loggers = build(cfg, tags)
        if not keep["callbacks"]:
            tr.callbacks = [c for c in tr.callbacks if isinstance(c, pl.callbacks.ProgressBar)]
        return tr, loggers

    T.build_trainer = trainer
    with tempfile.TemporaryDirectory() as out:
        cfg = T.job_config(args.arch, "s1_seed1", out, MICRO)
        data = T.build_data(cfg, {})[:2]
        no_loggers = copy.deepcopy(cfg)
        with open_dict(no_loggers):
            no_loggers.logger = None

        def zoo(c=cfg, callbacks=True):
            keep["callbacks"] = callbacks
            return Timed(T.zoo_run(c, *data)[0])

        def lightning():
            task, clock = T.seeded_task(cfg, data[1]), T.StepClock(WARM, STEPS)
            with quiet_lightning():
                trainer = pl.Trainer(
                    max_steps=WARM + STEPS + 1,
                    logger=False,
                    enable_checkpointing=False,
                    enable_progress_bar=False,
                    enable_model_summary=False,
                    accelerator="cpu",
                    devices=1,
                    limit_val_batches=0,
                    gradient_clip_val=cfg.trainer.gradient_clip_val,
                    callbacks=[clock],
                )
                trainer.fit(task, datamodule=copy.copy(data[0]))
            return Timed(clock.seconds()[0])

        contenders = {
            "zoo": zoo,
            "zoo, no loggers": lambda: zoo(no_loggers),
            "zoo, no callbacks": lambda: zoo(callbacks=False),
            "Lightning": lightning,
            "plain+k": lambda: Timed(T.plain_run(cfg, *data, fused=None)[0]),
            "plain": lambda: Timed(T.plain_run(cfg, *data, fused=False)[0]),
        }
        times = interleaved(contenders, 5, 1)
    ref = statistics.median(times["plain+k"])
    print(f"{args.arch}, micro size; median us per step (over plain+k):", file=sys.stderr)
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:18s} {1e6 * med / STEPS:7.0f}  (+{1e6 * (med - ref) / STEPS:5.0f})", file=sys.stderr)


if __name__ == "__main__":
    main()
