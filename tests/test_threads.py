"""Threads per process (zoo/threads.py): cores shared among the processes zoo starts on one machine."""

import pytest
import torch
from omegaconf import OmegaConf
from zoo_run import make_cfg

from zoo.run.threads import choose_threads, processes_per_machine, set_threads


@pytest.mark.parametrize(
    "requested, cores, processes, env, want",
    [
        (None, 2, 1, None, 2),
        (None, 2, 2, None, 1),
        (None, 16, 3, None, 5),
        (None, 2, 4, None, 1),
        (3, 2, 2, None, 3),  # the key wins over the count
        (None, 8, 1, "1", 1),  # the user's OMP_NUM_THREADS is kept
        (2, 8, 1, "1", 2),  # ... unless the key says otherwise
        (None, 8, 2, "x", 4),  # an unreadable OMP_NUM_THREADS is ignored
    ],
)
def test_choose_threads(requested, cores, processes, env, want):
    assert choose_threads(requested, cores, processes, env)[0] == want


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="threads=.* must be a positive integer"):
        choose_threads(bad, 2, 1, None)


def test_processes_of_a_cpu_ddp_run(tmp_path):
    assert processes_per_machine(make_cfg(tmp_path, [], arch="decoder_only")) == 1
    assert processes_per_machine(make_cfg(tmp_path, ["trainer=ddp_cpu"], arch="decoder_only")) == 2
    assert processes_per_machine(make_cfg(tmp_path, ["trainer=ddp_cpu", "trainer.devices=3"], arch="decoder_only")) == 3
    assert processes_per_machine(OmegaConf.create({"trainer": {"accelerator": "gpu", "devices": 4}})) == 1


def test_set_threads_sets_torch(monkeypatch, caplog):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        with caplog.at_level("INFO", logger="zoo"):
            assert set_threads(OmegaConf.create({"threads": 1, "trainer": {"accelerator": "cpu", "devices": 1}})) == 1
        assert torch.get_num_threads() == 1
        assert "torch threads per process: 1 (threads=1" in caplog.text
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("bad", ["0", "-2", "1.5"])
def test_generate_refuses_a_bad_thread_count_before_reading_the_checkpoint(tmp_path, capsys, bad):
    """zoo.generate threads=N takes what training's threads= takes; a bad one is its one error line, before the
    (here missing) checkpoint is read."""
    from zoo.run.generate import main

    assert main([f"ckpt_path={tmp_path / 'missing.ckpt'}", f"threads={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"zoo.generate: error: threads={bad} must be a positive integer"), err


def test_generate_threads_sets_torchs_threads(tmp_path, monkeypatch, capsys):
    """threads=3 gives torch 3 intra-op threads before the checkpoint is read (here it is missing: exit 2)."""
    from zoo.run.generate import HELP, main

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        torch.set_num_threads(1)
        assert main([f"ckpt_path={tmp_path / 'missing.ckpt'}", "threads=3"]) == 2
        assert torch.get_num_threads() == 3
        assert "does not exist" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)
    assert "threads=N" in HELP and "  threads " in HELP
