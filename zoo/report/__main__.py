"""`python -m zoo.report RUNS_DIR`: see zoo.report.build."""

import os
import sys

# the Scaling section's fits: scipy >= 1.15's L-BFGS-B is 10-30x slower with OpenBLAS threads (scipy issue
# #22438); one thread unless the user chose, set before numpy loads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from zoo.report.build import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
