"""`python -m zoo.convert`: the command's name stays; its code is zoo.interop.convert."""

import sys

from zoo.interop.convert import main

if __name__ == "__main__":
    sys.exit(main())
