"""zoo.run.cell_lock: a scaling cell's folder is trained by one process at a time."""

import math
import os
import subprocess

from zoo.run.cell_lock import LOCK, release_lock, take_lock


def test_a_live_processs_lock_is_kept_and_named(tmp_path):
    (tmp_path / LOCK).write_text(str(os.getppid()))  # pytest's parent: alive
    assert take_lock(tmp_path) == os.getppid()
    release_lock(tmp_path)  # not this process's: left alone
    assert (tmp_path / LOCK).read_text() == str(os.getppid())


def test_a_dead_processs_lock_is_taken_over(tmp_path):
    done = subprocess.Popen(["true"])
    done.wait()
    (tmp_path / LOCK).write_text(str(done.pid))
    assert take_lock(tmp_path) is None
    assert (tmp_path / LOCK).read_text() == str(os.getpid())


def test_this_processs_lock_is_taken_again_and_released(tmp_path):
    assert take_lock(tmp_path) is None and take_lock(tmp_path) is None
    release_lock(tmp_path)
    assert not (tmp_path / LOCK).exists()


def test_a_cell_another_process_trains_is_skipped_untouched(tmp_path, monkeypatch):
    """run_cell on a folder locked by a live process trains nothing and writes nothing."""
    from test_scaling_study import CELL, make_cfg

    from zoo.run import scaling_cell

    monkeypatch.setattr(scaling_cell.Cell, "fit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained")))
    (tmp_path / LOCK).write_text(str(os.getppid()))
    assert math.isnan(scaling_cell.run_cell(make_cfg(tmp_path, CELL)))
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK]
