"""`python -m zoo.trace`: the command (zoo.trace.command)."""

import sys

from zoo.trace.command import main

if __name__ == "__main__":
    sys.exit(main())
