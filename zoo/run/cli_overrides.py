"""Typos in command-line overrides, caught before Hydra runs anything.

`data.text_colum=x` names a key the config does not have; Hydra then advises `+data.text_colum=x`, which
adds a key nobody reads. check_overrides composes the config as Hydra is about to (a multirun: its master
config, then its first job as the basic sweeper would launch it) and, for each override of a missing key,
prints the keys of that node it may have meant (for a group option without a config file, such as
`data=tiny_shakspeare`, the group's options and the nearest), and exits with 2; so does an override that sets a
mapping to {} (scaling.sizes={}: Hydra merges it, a no-op), a budget.value that
does not resolve (budget_problem: a bad compare.budget), and a data key its datamodule does not take, written
in a YAML file or as +data.key= (zoo.data.config_keys), and a group chosen twice (+arch=a +arch=b:
zoo.run.cli_repeats). Every other outcome (a config that composes, any other error, a command line it does not
read) leaves everything to Hydra, as before.
"""

import difflib
import re
import sys
from pathlib import Path

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException, OverrideParseException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError

from zoo.data.config_keys import composed_key_problems
from zoo.run.budget import BudgetError, unwrapped
from zoo.run.cli_repeats import repeated_groups

CONFIG_NAME = "config"
# flags after which Hydra composes nothing, or composes another config than CONF_DIR/config.yaml
SKIP = (
    "help",
    "hydra_help",
    "info",
    "shell_completion",
    "experimental_rerun",
    "config_path",
    "config_name",
    "config_dir",
)


def _raise(message):
    raise ValueError(message)


def missing_key(e: ConfigCompositionException):
    """(override key, missing key, its node's path, the node's keys) when Hydra could not override a key that
    is not in the config; None for any other error."""
    cause = e.__cause__
    m = re.match(r"Could not override '([^']+)'", str(e))
    node = getattr(cause, "parent_node", None)
    if not (
        m
        and isinstance(cause, (ConfigAttributeError, ConfigKeyError))
        and isinstance(node, DictConfig)
        and cause.full_key
    ):
        return None
    return m.group(1), cause.full_key, cause.full_key.rpartition(".")[0], [str(k) for k in node.keys()]


def missing_option(e: Exception, overrides: list[str]) -> tuple[str, str] | None:
    """(the override, its message) when Hydra found no config file for a group option the command line chose
    (e.g. data=tiny_shakspeare): the message names the group's options and the nearest; None otherwise."""
    if not isinstance(e, MissingConfigException) or not e.missing_cfg_file or not e.options:
        return None
    group, _, option = e.missing_cfg_file.rpartition("/")
    chosen = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") == group.replace("/", ".")]
    if not group or not chosen:
        return None
    key = chosen[0].split("=", 1)[0]  # as typed: data, +arch, ...
    message = f"{key}={option} is not an option of {group}"
    found = own_config(group, option)
    if found is not None:  # the user's own file, which Hydra was not told where to find
        folder = found.parents[len(Path(group).parts)]
        return chosen[0], (
            f"{message}: Hydra reads configs of your own only from its search path, and {found} is not on it; "
            f"add hydra.searchpath=[file://{folder}] to the command line (or to your primary config)"
        )
    near = difflib.get_close_matches(option, list(e.options), n=1)
    hint = f"did you mean {key}={near[0]}? " if near else ""
    return chosen[0], (
        f"{message}; {hint}its options are: {', '.join(e.options)}. A config of your own is read from "
        f"DIR/{group}/{option}.yaml with hydra.searchpath=[file://DIR]"
    )


SEARCH_DEPTH = 3  # folders below the working folder own_config looks into


def own_config(group: str, option: str) -> Path | None:
    """The first <group>/<option>.yaml at most SEARCH_DEPTH folders below the working folder (e.g.
    ./conf/data/my_corpus.yaml for data=my_corpus), absolute; None when there is none."""
    for depth in range(SEARCH_DEPTH + 1):
        for path in sorted(Path.cwd().glob("/".join(["*"] * depth + [group, f"{option}.yaml"]))):
            if path.is_file():
                return path.resolve()
    return None


def syntax_problem(e: BaseException, argv: list[str]) -> str | None:
    """The one-line message of a config file that is not YAML (yaml's MarkedYAMLError, anywhere in e's chain:
    the file, line and column, what the parser found and where an unclosed bracket opened) or of an override
    Hydra's grammar cannot read (OverrideParseException: the override, the character and the override quoted,
    which Hydra reads as text); None for any other error."""
    import yaml

    chain, seen = e, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, yaml.MarkedYAMLError) and chain.problem_mark is not None:
            mark, opened = chain.problem_mark, chain.context_mark
            where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}"
            since = (
                f" ({chain.context} opened at line {opened.line + 1}, column {opened.column + 1}: close it)"
                if opened is not None and chain.context and opened.line != mark.line
                else ""
            )
            return (
                f"{where}: {chain.problem}{since}; that file is not valid YAML: check the indentation there (a "
                f"key as deep as its siblings), close every [ and {{, and quote a value that holds ': ' or ' #'"
            )
        if isinstance(chain, OverrideParseException):
            return _override_problem(argv)
        chain = chain.__cause__ or chain.__context__
    return None


def _override_problem(argv: list[str]) -> str | None:
    """The message of the first override in argv that Hydra's override grammar cannot read."""
    parser = OverridesParser.create()
    for arg in argv:
        if arg.startswith("-"):
            continue
        try:
            parser.parse_override(arg)
        except HydraException as e:  # OverrideParseException, or the lexer's error as a HydraException
            caret = re.search(r"\n(\s*)\^", str(e))
            token = re.search(r"at: '(.+?)'", str(e))
            at = len(caret.group(1)) if caret else arg.find(token.group(1), arg.find("=") + 1) if token else -1
            at = at if at >= 0 else None
            key, eq, value = arg.partition("=")
            char = f"`{arg[at]}` (character {at + 1})" if at is not None and at < len(arg) else "its text"
            fix = f"'{key}=\"{value}\"'" if '"' not in value else f"\"{key}='{value}'\""  # the shell keeps the quotes
            return (
                f"{arg}: Hydra's override grammar cannot read {char}; quote the value for Hydra, inside single "
                f"quotes for the shell: {fix} (zoo expands ~ in paths)"
            )
    return None


def describe(override: str, key: str, parent: str, keys: list[str], choices: dict) -> str:
    """The message of one missing key: the node (and the config group option it came from), the near keys."""
    leaf = key.rpartition(".")[2]
    if not parent and leaf in choices and choices[leaf] is None:  # a config group without an option (yet)
        picks = " (or +arch=..., whose task picks its data)" if leaf in ("data", "task") else ""
        return (
            f"{override} sets a key of {leaf}, but no {leaf}=... option is chosen, so the config has no "
            f"{leaf}; add {leaf}=<an option of conf/{leaf}/>{picks}"
        )
    option = choices.get(parent.split(".")[0]) if parent else None
    where = (f"{parent} ({option})" if isinstance(option, str) else parent) if parent else "the config"
    prefix = f"{parent}." if parent else ""
    close = difflib.get_close_matches(leaf, keys, n=1)
    if close and "." in close[0]:  # one key with a dot in its name (a sweeper's "scaling.cell"): no path reaches it
        return (
            f"{key} is not a key of {where}, whose key {close[0]!r} has a dot in its name, which an override cannot "
            f"name; to sweep it, give it on the command line instead: {close[0]}=A,B"
        )
    hint = (
        f"did you mean {prefix}{close[0]}?"
        if close
        else f"its keys are: {', '.join(k for k in keys if not k.startswith('_'))}"
    )
    return f"{key} is not a key of {where}; {hint} (+{override}=... adds a new key)"


def compose_checked(overrides: list[str], mode: RunMode):
    """(config or None, messages): compose with `overrides`, dropping each override of a missing key (so one
    pass names every typo); the config is None when composing failed otherwise."""
    hydra, found = GlobalHydra.instance().hydra, []
    for _ in range(len(overrides) + 1):
        try:
            cfg = hydra.compose_config(CONFIG_NAME, overrides, run_mode=mode, with_log_configuration=False)
        except ConfigCompositionException as e:
            option = missing_option(e, overrides)
            if option is not None:  # drop it and compose on, to name the other typos too
                found.append(option[1])
                overrides = [o for o in overrides if o != option[0]]
                continue
            miss = missing_key(e)
            if miss is None:
                break
            found.append(miss)
            left = [o for o in overrides if o.split("=", 1)[0] != miss[0]]
            if len(left) == len(overrides):  # not one of the command line's: nothing more to learn
                break
            overrides = left
            continue
        choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
        return cfg, [m if isinstance(m, str) else describe(*m, choices) for m in found]
    return None, [m if isinstance(m, str) else describe(*m, {}) for m in found]


def first_job(master: DictConfig) -> list[str] | None:
    """The overrides of a multirun's first job, as the basic sweeper builds them (its params from the config,
    then the command line's, sweeps expanded, and the master's hydra.* overrides); None for another sweeper."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    if not str(master.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    params = master.hydra.sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=True) if isinstance(params, DictConfig) else {}
    lines = [f"{k}={v}" for k, v in params.items()] + list(master.hydra.overrides.task)
    jobs = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(lines), None)
    return list(master.hydra.overrides.hydra) + list(jobs[0][0]) if jobs and jobs[0] else None


def budget_problem(cfg: DictConfig | None) -> list[str]:
    """The BudgetError message of cfg's budget.value (a bad compare.budget or a missing compare.budgets entry),
    as a one-item list; [] when it resolves. Found before any job starts, a multirun's too."""
    if cfg is None or cfg.get("budget") is None:
        return []
    try:
        cfg.budget.get("value")  # resolves ${zoo_budget:...}
    except Exception as e:  # noqa: BLE001 -- OmegaConf raises its own error while handling the resolver's
        if isinstance(unwrapped(e), BudgetError):
            return [str(unwrapped(e))]
    return []


def empty_merges(overrides: list[str], cfg: DictConfig | None) -> list[str]:
    """The messages of overrides that set a mapping of cfg with entries to {} (e.g. scaling.sizes={}): Hydra
    merges the {} into it, which changes nothing, so the run would go on with every entry."""
    if cfg is None:
        return []
    found = []
    for o in OverridesParser.create().parse_overrides([o for o in overrides if "=" in o and "{}" in o]):
        if o.is_delete() or o.is_sweep_override() or o.value() != {}:
            continue
        node = OmegaConf.select(cfg, o.key_or_group, throw_on_missing=False)
        if isinstance(node, DictConfig) and len(node):
            first = next(iter(node))
            found.append(
                f"{o.input_line} changes nothing: Hydra merges {{}} into {o.key_or_group}, which keeps its "
                f"entries ({', '.join(map(str, node))}); drop one with '~{o.key_or_group}.{first}', and keep at "
                "least one"
            )
    return found


def typos(argv: list[str], conf_dir: str) -> list[str]:
    """The messages of the overrides in argv (Hydra's command line) that choose a group twice (repeated_groups),
    name missing keys, or else of a bad budget (budget_problem)."""
    from hydra._internal.utils import get_args_parser

    if "--version" in argv:
        return []
    parser = get_args_parser()
    parser.error = _raise  # a command line Hydra will refuse: Hydra says so itself
    args = parser.parse_args(argv)
    if any(getattr(args, flag, None) for flag in SKIP):
        return []
    repeated = repeated_groups(list(args.overrides), conf_dir)  # +arch=a +arch=b
    if repeated:
        return repeated
    with initialize_config_dir(config_dir=conf_dir, version_base="1.3"):
        if not args.multirun:
            cfg, found = compose_checked(list(args.overrides), RunMode.RUN)
            return found or empty_merges(args.overrides, cfg) or budget_problem(cfg) or composed_key_problems(cfg)
        master, found = compose_checked(list(args.overrides), RunMode.MULTIRUN)
        found = found or empty_merges(args.overrides, master)
        if found or master is None:
            return found
        job = first_job(master)
        if job is None:
            return []
        cfg, found = compose_checked(job, RunMode.RUN)
        return found or budget_problem(cfg) or composed_key_problems(cfg)


def check_overrides(argv: list[str], conf_dir: str) -> None:
    """Exit with 2, naming each override of a missing key and the keys it may have meant, or the file and line of
    a config that is not YAML, or an override Hydra's grammar cannot read (syntax_problem); else return."""
    try:
        found = typos(argv, conf_dir)
    except Exception as e:  # noqa: BLE001 -- anything unforeseen: Hydra reports on the command line as it always did
        problem = syntax_problem(e, argv)
        if problem is None:
            return
        found = [problem]
    if found:
        for message in found:
            print(f"zoo: error: {message}", file=sys.stderr)
        sys.exit(2)
