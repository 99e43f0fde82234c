"""Typos in a data config: a key of `data` that its datamodule (data._target_) does not take.

Hydra would pass it to the constructor and fail with a TypeError (exit 1, a traceback). data_key_problems
finds such keys before any work and says where each was written (the YAML file of the data option, a
`+data.key=` override, or the composed config), the key it may have meant and the fix; the callers
(zoo.run.checks.config.check_config, zoo.run.cli_overrides) print it and exit 2, as for the same typo on the command
line.
"""

import difflib
import inspect
from pathlib import Path

from omegaconf import DictConfig, OmegaConf


def datamodule_keys(target: str) -> list[str] | None:
    """The keyword arguments of the class `target` names (None: it takes any, or it cannot be imported, which
    Hydra reports itself)."""
    from hydra.utils import get_class

    try:
        params = inspect.signature(get_class(target).__init__).parameters.values()
    except Exception:  # noqa: BLE001 -- a bad _target_ is Hydra's to report
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.name != "self" and p.kind != p.VAR_POSITIONAL]


def option_file(group: str, choice, sources) -> Path | None:
    """The YAML file of option `choice` of config group `group` (<group>/<choice>.yaml) in the first config
    source (Hydra's search path, a list of {path, schema}) that has it; None when no file source has it."""
    if not isinstance(choice, str) or not choice:
        return None
    for source in sources:
        if source.get("schema") == "file":
            path = Path(source["path"]) / group / f"{choice}.yaml"
            if path.is_file():
                return path
    return None


def load(path: Path) -> DictConfig | None:
    """The YAML file as a DictConfig, or None when it is not a mapping or cannot be read."""
    try:
        node = OmegaConf.load(path)
    except Exception:  # noqa: BLE001 -- a file Hydra has read; unreadable here: not the one to name
        return None
    return node if isinstance(node, DictConfig) else None


def where_set(key: str, choices: dict, sources, overrides) -> tuple[str, str]:
    """(where the key data.<key> was written, the fix's place): the data option's YAML file (its own keys, not
    those of its defaults), else a command-line override, else another chosen option's file that sets data.<key>
    (a global package such as conf/debug/limit.yaml), else the composed config."""
    own = option_file("data", choices.get("data"), sources)
    if own is not None and key in (load(own) or {}):
        return f"in {own}", f"in {own}"
    for o in overrides:
        if o.split("=", 1)[0].lstrip("+~") == f"data.{key}":
            return f"set on the command line: {o}", "on the command line"
    for group, choice in choices.items():
        path = option_file(group, choice, sources) if group != "data" and "/" not in group else None
        node = load(path) if path is not None else None
        if node is not None and isinstance(node.get("data"), DictConfig) and key in node.data:
            return f"set by {group}={choice}, {path}", f"in {path}, or choose another {group} option"
    return f"in the config of data={choices.get('data')}", "where it is set"


def data_key_problems(data: DictConfig | None, hydra_cfg: DictConfig | None = None) -> list[str]:
    """One message for each key of the data config `data` that its datamodule (data._target_) does not take
    (keys starting with "_" are Hydra's): where it was written, the nearest key (difflib) or the keys there
    are, and the fix. hydra_cfg: the hydra node (runtime.choices, runtime.config_sources, overrides.task);
    None = HydraConfig's, when initialized. [] when every key is taken, or there is no _target_."""
    if not isinstance(data, DictConfig) or not data.get("_target_"):
        return []
    keys = datamodule_keys(str(data._target_))
    if keys is None:
        return []
    if hydra_cfg is None:
        from hydra.core.hydra_config import HydraConfig

        hydra_cfg = HydraConfig.get() if HydraConfig.initialized() else None
    choices, sources, overrides = {}, [], []
    if hydra_cfg is not None:
        choices = OmegaConf.to_container(hydra_cfg.runtime.choices) or {}
        sources = OmegaConf.to_container(hydra_cfg.runtime.config_sources) or []
        overrides = list(hydra_cfg.overrides.task)
    choice = choices.get("data")
    name = str(data._target_).rsplit(".", 1)[-1]
    out = []
    for key in map(str, data.keys()):
        if key.startswith("_") or key in keys:
            continue
        where, fix_at = where_set(key, choices, sources, overrides)
        near = difflib.get_close_matches(key, keys, n=1)
        hint = f"did you mean data.{near[0]}?" if near else f"its keys are: {', '.join(keys)}"
        fix = f"rename it to {near[0]}" if near else "remove it or use one of those keys"
        out.append(f"data.{key} ({where}) is not a key of data ({choice or name}: {name}); {hint}\nFix: {fix} {fix_at}")
    return out


def composed_key_problems(cfg: DictConfig | None) -> list[str]:
    """data_key_problems of a config composed with its hydra node (zoo.run.cli_overrides, before Hydra runs a job);
    [] for None."""
    if cfg is None or "hydra" not in cfg:
        return []
    return data_key_problems(cfg.get("data"), cfg.hydra)
