"""`python -m zoo.translate`: the command's name stays; its code is zoo.run.translate."""

import sys

from zoo.run.translate import main

if __name__ == "__main__":
    sys.exit(main())
