"""`python -m zoo.dashboard`: the command's name stays; its code is zoo.report.dashboard."""

import sys

from zoo.report.dashboard import main

if __name__ == "__main__":
    sys.exit(main())
