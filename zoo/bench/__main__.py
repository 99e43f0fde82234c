"""python -m zoo.bench: see zoo/bench/cli.py."""

import sys

from zoo.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
