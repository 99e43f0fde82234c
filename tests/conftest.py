import os
import re
from pathlib import Path

import pytest

# one BLAS thread in each test process, set before numpy loads: the law fits make many tiny BLAS calls, and two
# pytest-xdist workers each spinning a thread per core oversubscribe the cores (the scaling tests ran 3-6x slower)
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

# the datasets: $ZOO_DATA_MIRROR when set (as .ci/run sets it), else ../shared/data beside the repository
SHARED_DATA = Path(os.environ.get("ZOO_DATA_MIRROR") or Path(__file__).resolve().parents[1].parent / "shared" / "data")

# set when conftest loads, before any test module: an environment a module copies at import (a subprocess's env)
# has them too. Datasets from ../shared/data as the resolver's mirror (as .ci/run does); the report's null table
# drawn cheaply (default 100 replicates)
os.environ.setdefault("ZOO_DATA_MIRROR", str(SHARED_DATA))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("ZOO_SCALING_NULL_REPS", "5")


def pytest_collection_modifyitems(config, items):
    """A -m on the command line replaces addopts' -m 'not slow'; slow tests stay deselected unless it names
    slow, so `-m "not e2e"` is the fast unit suite and `-m e2e` the end-to-end tests that are not slow."""
    if re.search(r"\bslow\b", config.option.markexpr or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared datasets' folder, ../shared/data; skips the test where it is missing (for marks at import
    time: zoo_run.needs_shared)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not available")
    return SHARED_DATA


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module's tiny models: much faster on a shared 2-core machine (no OpenMP
    spinning). Use it per module: pytestmark = pytest.mark.usefixtures("one_thread")."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def pytest_sessionstart(session) -> None:
    """A line at the top of the run when the datasets are not where the tests read them (most data tests then
    fail or skip): where they were looked for, and the fix."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if SHARED_DATA.is_dir() or reporter is None or hasattr(session.config, "workerinput"):
        return
    reporter.write_line(
        f"zoo: the datasets are not at {SHARED_DATA}: tests that read them will fail or skip; set "
        "ZOO_DATA_MIRROR=/absolute/path/to/shared/data (or clone the repository beside shared/)",
        yellow=True,
    )
