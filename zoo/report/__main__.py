"""`python -m zoo.report RUNS_DIR`: see zoo.report.build."""

import sys

from zoo.report.build import main

if __name__ == "__main__":
    sys.exit(main())
