"""A Hydra callback (conf/config.yaml's hydra.callbacks) that names a multirun's directory when it starts and
ends, with the command that reports it: a sweep's jobs otherwise print only their own run directories."""

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepDir(Callback):
    """Prints `zoo: multirun dir: DIR` at the start, and the `python -m zoo.report DIR` line at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        print(f"zoo: multirun dir: {config.hydra.sweep.dir}", flush=True)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        d = config.hydra.sweep.dir
        print(f"zoo: multirun done: {d}\nzoo: report it with: python -m zoo.report {d}", flush=True)
