"""Sweeps and dashboards: Hydra multirun over architectures (W&B runs grouped by the sweep), the Optuna
sweeper on the returned metric, the SLURM launcher config, and the W&B sweep files."""

import json
import os
import struct
import time
import zlib
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from zoo_run import REPO, TINY_MODEL, run_cli

from zoo.run.checks.config import check_config
from zoo.run.conf import CONF_DIR

SWEEPS = sorted((REPO / "experiments" / "sweeps").glob("*.yaml"))
TINY_LM = [
    "model.max_len=64",
    "data.block_size=32",
    "data.batch_size=8",
    "data.batches_per_epoch=2",
    "data.val_windows=8",
    "trainer.max_steps=4",
    "task.sample=null",
    "trainer.enable_model_summary=false",
]


def compose_cfg(overrides):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def wandb_records(run_dir: Path) -> dict:
    """The run, config, summary and history records (history: one {key: value} per logged row, history_keys: every
    key) of the one offline W&B run under run_dir. The .wandb file is a
    LevelDB-style log (32 KiB blocks; records with a 7-byte header: crc32, length, type 1 full / 2 first /
    3 middle / 4 last) of wandb.proto Record messages, after a 7-byte ':W&B' file header. The crc32 is zlib's,
    over the type byte then the data; reading stops at the first record that is cut short or fails it (the tail
    a writer that lags wandb.finish() has not yet written), so a caller polls for the record it needs."""
    from wandb.proto import wandb_internal_pb2 as pb

    files = list(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(files) == 1, files
    data, pos, block, buf, chunks = files[0].read_bytes(), 7, 32768, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        left = block - pos % block
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if left < 7 or (kind == 0 and length == 0):  # block trailer / padding
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if len(chunk) < length or zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            break
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            chunks.append(buf)
    out = {"config": {}, "summary": {}, "history_keys": set(), "history": [], "exit": False}
    for c in chunks:
        r = pb.Record()
        r.ParseFromString(c)
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out["run"] = r.run
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in r.config.update})
        elif kind == "summary":
            out["summary"].update({i.key: json.loads(i.value_json) for i in r.summary.update if i.key})
        elif kind == "exit":
            out["exit"] = True
        elif kind == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            out["history_keys"].update(row)
            out["history"].append(row)
    return out


def test_a_wandb_file_cut_short_reads_as_its_complete_records(tmp_path):
    """A writer that lags wandb.finish() leaves a file cut mid-record: the reader returns the records written whole
    (a config record, then a summary record that spans a 32 KiB block boundary as first + last parts) and never
    raises. The file is built here by the LevelDB log rules, independently of the reader."""
    from wandb.proto import wandb_internal_pb2 as pb

    def frame(kind, data):
        return struct.pack("<IHB", zlib.crc32(data, zlib.crc32(bytes([kind]))), len(data), kind) + data

    config, summary = pb.Record(), pb.Record()
    config.config.update.add(key="lr", value_json="0.008")
    summary.summary.update.add(key="val/loss", value_json="1.5")
    summary.summary.update.add(key="pad", value_json=json.dumps("x" * 40000))
    a, b = config.SerializeToString(), summary.SerializeToString()
    head = b":W&B" + b"\x00\x00\x00" + frame(1, a)
    room = 32768 - len(head) - 7  # the first part fills block 0; the last part opens block 1
    body = head + frame(2, b[:room]) + frame(4, b[room:])
    folder = tmp_path / "wandb" / "offline-run-1" / "run-1.wandb"
    folder.parent.mkdir(parents=True)
    seen = set()
    for cut in [len(head) - 1, len(head), 32768 - 3, 32768 + 7, len(body) - 1, len(body)]:
        folder.write_bytes(body[:cut])
        w = wandb_records(tmp_path)
        seen.add((tuple(w["config"].items()), tuple(w["summary"])))
    whole = (("lr", 0.008),)
    assert seen == {((), ()), (whole, ()), (whole, ("val/loss", "pad"))}
    folder.write_bytes(body[:-1] + bytes([body[-1] ^ 1]))  # a flipped bit in the last byte: its crc fails
    assert wandb_records(tmp_path)["summary"] == {}


def finished_wandb_records(run_dir: Path, timeout_s: float = 60.0) -> dict:
    """wandb_records once the file holds the run's exit record, the last one written: in-process, wandb's writer
    may lag wandb.finish(), and summaries interleave with history rows, so only the exit record marks the file
    whole. Fails after timeout_s seconds without it."""
    deadline = time.monotonic() + timeout_s
    while not (w := wandb_records(run_dir))["exit"]:
        assert time.monotonic() < deadline, f"no exit record in {run_dir}'s W&B file after {timeout_s} s"
        time.sleep(0.2)
    return w


@pytest.mark.slow
@pytest.mark.e2e
def test_three_architecture_multirun(tmp_path):
    """`python -m zoo -m +arch=encoder_only,decoder_only,encoder_decoder`: 3 run dirs, 3 results.json, 3
    offline W&B runs in one group (the sweep dir), each tagged and configured for dashboards: the config nested
    as W&B nests it, with arch/task.name/dataset/params/flops_per_token, the same metric names for every
    architecture."""
    sweep = tmp_path / "sweep"
    r = run_cli(
        [
            "-m",
            "+arch=encoder_only,decoder_only,encoder_decoder",
            *TINY_MODEL,
            "trainer.max_steps=2",
            "trainer.limit_val_batches=1",
            "trainer.limit_test_batches=1",
            "trainer.enable_model_summary=false",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    dirs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [d.name for d in dirs] == ["0", "1", "2"]
    expected = {
        "encoder_only": ("classification", "sst2", "val/acc"),
        "decoder_only": ("lm", "tiny_shakespeare", "val/loss"),
        "encoder_decoder": ("translation", "multi30k", "val/bleu"),
    }
    seen = set()
    for d in dirs:
        res = json.loads((d / "results.json").read_text())
        arch = res["arch"]
        task, dataset, monitor = expected[arch]
        seen.add(arch)
        assert (res["task"], res["dataset"], res["steps"]) == (task, dataset, 2)
        assert monitor in res["best"]
        with open(d / "csv" / "metrics.csv") as f:
            assert {"train/loss", "val/loss", monitor} <= set(f.readline().strip().split(","))
        w = wandb_records(d)
        assert w["run"].run_group == str(sweep) and w["run"].job_type == arch
        assert list(w["run"].tags) == [arch, task, dataset]
        c = w["config"]
        assert (c["arch"], c["task"]["name"], c["dataset"]) == (arch, task, dataset)
        assert c["params"] == res["params"] and c["flops_per_token"] == res["flops_per_token"]
        assert c["model"]["d_model"] == 32 and c["task"]["monitor"] == monitor and "model.d_model" not in c
        assert w["summary"][f"best/{monitor}"] == pytest.approx(res["best"][monitor])
        common = {"train/loss", "lr", "tokens/s", "val/loss", monitor}
        if task != "lm":  # the tasks with a test split: test/<metric> under the same names
            common |= {"test/loss", monitor.replace("val/", "test/")}
        assert common <= set(res["final"]) and common <= w["history_keys"]
    assert seen == set(expected)


@pytest.mark.slow
@pytest.mark.e2e
def test_optuna_sweep_optimizes_the_returned_metric(tmp_path):
    """hparams_search=optuna with 2 trials: the study minimizes val/loss (task.monitor_mode=min), and its
    best value and parameters are those of the trial whose results.json has the lowest best val/loss."""
    sweep = tmp_path / "optuna"
    r = run_cli(
        [
            "+arch=decoder_only",
            "hparams_search=optuna",
            "hydra.sweeper.n_trials=2",
            *TINY_MODEL,
            *TINY_LM,
            "logger=csv",
            "callbacks=none",
            f"hydra.sweep.dir={sweep}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Directions: ['minimize']" in r.stdout + r.stderr
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    trials = []
    for d in sorted(p for p in sweep.iterdir() if p.is_dir()):
        res = json.loads((d / "results.json").read_text())
        overrides = dict(o.split("=", 1) for o in yaml.safe_load((d / ".hydra" / "overrides.yaml").read_text()))
        trials.append((res["best"]["val/loss"], overrides))
    assert len(trials) == 2
    value, overrides = min(trials, key=lambda t: t[0])
    assert best["best_value"] == pytest.approx(value, rel=1e-6)
    assert set(best["best_params"]) == {
        "task.optimizer.lr",
        "task.optimizer.weight_decay",
        "task.scheduler.warmup_steps",
        "model.dropout",
    }
    for k, v in best["best_params"].items():
        assert float(overrides[k]) == pytest.approx(float(v))


@pytest.mark.parametrize(
    "arch,metric,direction",
    [
        ("decoder_only", "val/loss", "minimize"),
        ("encoder_only", "val/acc", "maximize"),
        ("encoder_decoder", "val/bleu", "maximize"),
    ],
)
def test_optuna_config_follows_the_task(arch, metric, direction):
    cfg = compose_cfg([f"+arch={arch}", "hparams_search=optuna"])
    assert cfg.optimized_metric == metric and cfg.hydra.sweeper.direction == direction
    assert cfg.hydra.sweeper._target_.endswith("OptunaSweeper") and str(cfg.hydra.mode) == "RunMode.MULTIRUN"


def test_slurm_launcher_config_makes_an_sbatch_script(tmp_path, monkeypatch):
    """hydra/launcher=slurm composes to hydra-submitit-launcher's SlurmLauncher, and submitit accepts its
    parameters (built as SlurmLauncher.launch does) and writes them into the sbatch script."""
    import submitit
    from hydra.utils import instantiate
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    cfg = compose_cfg(
        ["+arch=decoder_only", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", f"hydra.sweep.dir={tmp_path}"]
    )
    launcher = instantiate(cfg.hydra.launcher)
    assert type(launcher).__name__ == "SlurmLauncher"
    params = dict(launcher.params)
    fake = tmp_path / "bin"  # submitit checks that srun exists
    fake.mkdir()
    (fake / "srun").write_text("#!/bin/sh\n")
    (fake / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    executor = submitit.AutoExecutor(
        cluster="slurm", folder=params.pop("submitit_folder"), slurm_max_num_timeout=params.pop("max_num_timeout")
    )
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
    script = executor._executor._make_submission_file_text("python -m zoo", "uid")
    for line in (
        "--partition=gpu",
        "--time=240",
        "--gpus-per-node=1",
        "--ntasks-per-node=1",
        "--cpus-per-task=8",
        "--mem=64GB",
        "--nodes=1",
    ):
        assert f"#SBATCH {line}" in script


def sweep_values(spec: dict) -> list:
    """Every value a W&B sweep parameter can take that matters here: its list, or its range's ends."""
    if "values" in spec:
        return spec["values"]
    if "value" in spec:
        return [spec["value"]]
    return [spec["min"], spec["max"]]


@pytest.mark.parametrize("path", SWEEPS, ids=[p.name for p in SWEEPS])
def test_wandb_sweep_command_lines_are_accepted(path):
    """Each experiments/sweeps/*.yaml is a W&B sweep whose agent command line (built with wandb's own
    macro expansion) composes into a valid zoo config carrying the sampled values, for every listed value
    and range end; the sweep's metric is best/<task.monitor> in the task's direction."""
    from wandb.sdk.launch.sweeps.utils import create_sweep_command, create_sweep_command_args

    sweep = yaml.safe_load(path.read_text())
    assert sweep["method"] in ("grid", "random", "bayes")
    params = sweep["parameters"]
    n = max(len(sweep_values(p)) for p in params.values())
    for k in range(n):  # the k-th value of every parameter (cycling), so every value is tried once
        args = {name: {"value": sweep_values(p)[k % len(sweep_values(p))]} for name, p in params.items()}
        macros = {**create_sweep_command_args({"args": args}), "env": ["/usr/bin/env"]}
        command = []
        for c in create_sweep_command(list(sweep["command"])):
            command += macros[c[2:-1]] if c.startswith("${") and c.endswith("}") else [c]
        assert command[:4] == ["/usr/bin/env", "python", "-m", "zoo"]
        cfg = compose_cfg(command[4:])
        check_config(cfg)
        for name, a in args.items():
            assert OmegaConf.select(cfg, name) == a["value"], name
        assert cfg.logger.wandb.offline is False  # an agent's runs report to the sweep
    goal = {"min": "minimize", "max": "maximize"}[cfg.task.monitor_mode]
    assert sweep["metric"] == {"name": f"best/{cfg.task.monitor}", "goal": goal}


def test_wandb_sweeps_are_the_documented_ones():
    """experiments/sweeps/ holds README's two sweeps (an empty folder would leave the test above with no
    case), each named after the +arch its agent starts, with a `program` that exists."""
    assert [p.stem for p in SWEEPS] == ["decoder_only_lm", "encoder_only_sst2"]
    for path in SWEEPS:
        sweep = yaml.safe_load(path.read_text())
        (arch,) = [c.removeprefix("+arch=") for c in sweep["command"] if c.startswith("+arch=")]
        assert path.stem.startswith(f"{arch}_"), (path.name, arch)
        assert (REPO / sweep["program"]).is_file()


@pytest.mark.slow
@pytest.mark.e2e
def test_optuna_direction_against_the_metric_is_refused(tmp_path):
    """hydra.sweeper.direction=minimize while optimized_metric is val/acc (better higher) would sweep toward the
    worst trials: the first trial stops before training with the fix (exit 2)."""
    r = run_cli(
        [
            "+arch=encoder_only",
            "hparams_search=optuna",
            "hydra.sweeper.n_trials=1",
            "hydra.sweeper.direction=minimize",
            "logger=csv",
            f"hydra.sweep.dir={tmp_path / 'optuna'}",
        ],
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stderr[-2000:]
    assert (
        "hydra.sweeper.direction=minimize, but optimized_metric=val/acc is better higher; leave the direction "
        "to hparams_search"
    ) in r.stderr
    assert not list(tmp_path.rglob("*.ckpt"))
