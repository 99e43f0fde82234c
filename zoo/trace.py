"""`python -m zoo.trace`: the command's name; its code is zoo.run.trace."""

import sys

from zoo.run.trace import main

if __name__ == "__main__":
    sys.exit(main())
