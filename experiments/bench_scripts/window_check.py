"""The throughput bench's s1 comparison at another window, and without zoo's progress bar or loggers
(experiments/RESULTS.md, "Throughput"): ms per step of zoo's Trainer (as built for an experiment=scaling job,
then with trainer.enable_progress_bar=false, logger=null, or both) and of the plain loops, median of 5
interleaved repetitions of STEPS steps after 10:

    python experiments/bench_scripts/window_check.py [--arch decoder_only] [--size s1] [--steps 100]
"""

import argparse
import copy
import statistics
import tempfile

from omegaconf import open_dict

from zoo.bench import throughput as T
from zoo.bench.timing import Timed, interleaved


def variant(cfg, **trainer_or_logger):
    """A copy of cfg with trainer.enable_progress_bar and / or logger replaced."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        if "bar" in trainer_or_logger:
            cfg.trainer.enable_progress_bar = trainer_or_logger["bar"]
        if "logger" in trainer_or_logger:
            cfg.logger = trainer_or_logger["logger"]
    return cfg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="decoder_only", choices=T.ARCHS)
    parser.add_argument("--size", default="s1")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    T.WARM_STEPS, T.TIMED_STEPS = 10, args.steps
    with tempfile.TemporaryDirectory() as out:
        cfg = T.job_config(args.arch, f"{args.size}_seed1", out, ())
        data = T.build_data(cfg, {})[:2]
        configs = {
            "zoo": cfg,
            "zoo, no bar": variant(cfg, bar=False),
            "zoo, no loggers": variant(cfg, logger=None),
            "zoo, neither": variant(cfg, bar=False, logger=None),
        }
        contenders = {name: (lambda c=c: Timed(T.zoo_run(c, *data)[0])) for name, c in configs.items()}
        contenders["plain+k"] = lambda: Timed(T.plain_run(cfg, *data, fused=None)[0])
        contenders["plain"] = lambda: Timed(T.plain_run(cfg, *data, fused=False)[0])
        times = interleaved(contenders, 5, 1)
    ref = statistics.median(times["plain"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:16s} {1e3 * med / args.steps:7.2f} ms/step  plain / this {ref / med:.3f}")


if __name__ == "__main__":
    main()
