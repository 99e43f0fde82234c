"""zoo.run.cell_lock: a scaling cell's folder is trained by one process at a time."""

import math
import os
import subprocess
import sys
from contextlib import contextmanager

import pytest

from zoo.run.cell_lock import LOCK, release_lock, take_lock

TAKE = (
    "import sys; from zoo.run.cell_lock import take_lock; print(take_lock(sys.argv[1]), flush=True); sys.stdin.read()"
)


@contextmanager
def other_process(folder, wait_for=None):
    """A second Python process that calls take_lock(folder), prints what it returned and holds what it took until
    the block ends (its stdin closes). wait_for: a file it waits for first (a common start)."""
    code = TAKE if wait_for is None else f"import os, time\nwhile not os.path.exists({str(wait_for)!r}): pass\n" + TAKE
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip
    try:
        yield proc
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def took(proc) -> str:
    return proc.stdout.readline().strip()


def test_a_live_processs_lock_is_kept_and_named(tmp_path):
    with other_process(tmp_path) as holder:
        assert took(holder) == "None"
        assert take_lock(tmp_path) == holder.pid
        release_lock(tmp_path)  # not this process's: left alone
        assert (tmp_path / LOCK).read_text() == str(holder.pid)
    assert take_lock(tmp_path) is None  # its holder has exited: free
    release_lock(tmp_path)


def test_a_killed_processs_lock_is_free_and_a_stale_pid_file_is_not_a_lock(tmp_path):
    with other_process(tmp_path) as holder:
        assert took(holder) == "None"
        holder.kill()  # kill -9: no exit handler runs, the kernel drops its lock
        holder.wait()
        assert take_lock(tmp_path) is None and (tmp_path / LOCK).read_text() == str(os.getpid())
    release_lock(tmp_path)
    (tmp_path / LOCK).write_text("1")  # a PID left in the file (an earlier protocol's lock): no process holds it
    assert take_lock(tmp_path) is None
    release_lock(tmp_path)


def test_two_processes_started_together_on_a_stale_lock_take_it_once(tmp_path):
    """Both read a dead PID and took the cell over, in 120 of 300 trials, with the PID-file lock."""
    for trial in range(20):
        folder, go = tmp_path / f"cell{trial}", tmp_path / f"go{trial}"
        folder.mkdir()
        (folder / LOCK).write_text("999999999")
        with other_process(folder, go) as one, other_process(folder, go) as two:
            go.touch()
            assert sorted([took(one), took(two)]).count("None") == 1, trial


def test_this_processs_lock_is_taken_again_and_released(tmp_path):
    assert take_lock(tmp_path) is None and take_lock(tmp_path) is None
    with other_process(tmp_path) as other:
        assert took(other) == str(os.getpid())
    release_lock(tmp_path)
    with other_process(tmp_path) as other:
        assert took(other) == "None"


def test_a_cell_another_process_trains_is_skipped_untouched(tmp_path, monkeypatch):
    """run_cell on a folder locked by a live process trains nothing and writes nothing."""
    from test_scaling_study import CELL, make_cfg

    from zoo.run import scaling_cell

    monkeypatch.setattr(scaling_cell.Cell, "fit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained")))
    with other_process(tmp_path) as holder:
        assert took(holder) == "None"
        assert math.isnan(scaling_cell.run_cell(make_cfg(tmp_path, CELL)))
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK]


def test_a_cell_that_fails_releases_its_lock(tmp_path):
    """A folder of another design refuses the cell (ConfigError) after the lock is taken: the lock is released,
    and the other process may take the cell while this one lives (it kept it)."""
    from test_scaling_study import CELL, make_cfg

    from zoo.errors import ConfigError
    from zoo.run import scaling_cell

    (tmp_path / "cell.json").write_text('{"arch": "decoder_only", "config": {"model.d_model": 999}}')
    with pytest.raises(ConfigError):
        scaling_cell.run_cell(make_cfg(tmp_path, CELL))
    with other_process(tmp_path) as other:
        assert took(other) == "None"
