"""`python -m zoo.generate`: the command's name stays; its code is zoo.run.generate."""

import sys

from zoo.run.generate import main

if __name__ == "__main__":
    sys.exit(main())
