"""zoo.bench: benchmarks of zoo's models against their PyTorch and third-party peers (the command: cli.py)."""

from zoo.bench.cli import BENCHMARKS, main, parse_args
from zoo.bench.options import Options
from zoo.bench.timing import Timed, interleaved, median

__all__ = ["BENCHMARKS", "Options", "Timed", "interleaved", "main", "median", "parse_args"]
