import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(autouse=True, scope="session")
def _data_mirror():
    """Tests read datasets from ../shared/data as the resolver's mirror (as .ci/run does)."""
    os.environ.setdefault("ZOO_DATA_MIRROR", str(SHARED_DATA))
    os.environ.setdefault("WANDB_MODE", "offline")
    yield
