"""The data side of a scaling study (experiment=scaling, experiment=scaling_translation, on zoo's corpora or a
user's): the tokens one step trains, the tokens of the training split, and the refusal of a corpus too small for
the plan's largest size.

D counts what the loss is scored on: an LM study's training tokens; a translation study's TARGET tokens (each
sentence's with its EOS: the positions the loss predicts; zoo.tasks.translation.Translation's
cost["target_tokens"]). A translation batch holds whole sentence pairs within data.max_tokens, so its target
tokens are a property of the data: with scaling.block_size null (experiment=scaling_translation) the study
measures them (target_tokens_per_batch) and sets scaling.block_size to them, in the plan and in each cell, and a
size's batch_size counts such batches (1: one batch a step), so a budget's steps are b N / (batch_size x
block_size) as in the LM study."""

import logging

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from zoo.errors import ConfigError, is_whole
from zoo.scaling.design import check_design
from zoo.scaling.grid import cell_size
from zoo.scaling.sizes import branches, size_non_embedding, step_tokens

log = logging.getLogger("zoo")

MAX_PASSES = 4  # the largest run may read the training split at most this often (Muennighoff et al. 2023)
# data settings that cannot change the batches' target tokens: where files are, the seed (the cut of length-sorted
# pairs is the same for every seed), workers
_NOT_MEASURED = ("tokenizer_dir", "seed", "num_workers", "data_dir", "mirror")
_MEASURED: dict[str, int] = {}  # data settings -> target tokens per batch, once per process


def is_translation(cfg: DictConfig) -> bool:
    """Whether the job's task reads translation batches (zoo.tasks.translation.Translation)."""
    return getattr(get_class(cfg.task._target_), "BATCH", None) == "translation"


def train_tokens(dm) -> int:
    """The training split's tokens that D counts: a parallel corpus's target tokens (each sentence's with its EOS),
    an LM corpus's tokens. dm: a set-up datamodule."""
    train_set = getattr(dm, "train_set", None)
    if train_set is not None and hasattr(train_set, "tgt_out"):
        return sum(len(t) for t in train_set.tgt_out)
    return len(dm.train_data)


def target_tokens_per_batch(dm) -> int:
    """The mean target tokens of a training batch of a set-up translation datamodule, rounded: its training split's
    target tokens over the batches of an epoch (the cut of length-sorted pairs within data.max_tokens is the same
    every epoch, so an epoch trains exactly those tokens)."""
    return max(1, round(train_tokens(dm) / len(dm.train_batches(0))))


def study_data(data: DictConfig):
    """The datamodule of a data config, set up, writing no tokenizer file (tokenizer_dir None where it has one)."""
    extra = {"tokenizer_dir": None} if "tokenizer_dir" in data else {}
    dm = instantiate(data, _convert_="all", **extra)
    dm.prepare_data()
    dm.setup()
    return dm


def set_step_tokens(cfg: DictConfig, dm=None) -> int | None:
    """For a translation study whose scaling.block_size is null: set it to target_tokens_per_batch of the job's
    data (dm when given, else built once per process per data setting) and return it; None (nothing set) for any
    other job."""
    if cfg.get("scaling") is None or cfg.scaling.get("block_size") is not None or not is_translation(cfg):
        return None
    settings = {k: cfg.data.get(k) for k in cfg.data if k not in _NOT_MEASURED}  # resolved
    key = repr(
        sorted(
            (k, OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v) for k, v in settings.items()
        )
    )
    if key not in _MEASURED:
        _MEASURED[key] = target_tokens_per_batch(dm if dm is not None else study_data(cfg.data))
        log.info("scaling: %d target tokens a batch of data.max_tokens=%s", _MEASURED[key], cfg.data.max_tokens)
    with open_dict(cfg):
        cfg.scaling.block_size = _MEASURED[key]
    return _MEASURED[key]


def largest_budget(scaling, name: str) -> tuple[int, int]:
    """(N, D) of a size's largest budget: its non-embedding parameters and the tokens its last step reaches."""
    size = OmegaConf.to_container(scaling.sizes[name], resolve=True)
    block = int(scaling.block_size)
    last = branches(size, scaling.budgets, float(scaling.cooldown), block)[-1]
    return size_non_embedding(size), last.end * step_tokens(size, block)


def check_passes(jobs, tokens: int, what: str = "tokens") -> None:
    """Raise ConfigError when a job's size would read the training split (`tokens` of it) more than MAX_PASSES
    times at its largest budget, naming the largest size of the sweep that it can feed. jobs: [(arch, job
    config)]; what: the kind of tokens, for the message (e.g. "target tokens")."""
    names = list(dict.fromkeys(cell_size(job.scaling.cell, job.scaling.sizes) for _, job in jobs))
    check_size_passes(jobs[0][1].scaling, names, tokens, what)


def check_size_passes(s, names: list[str], tokens: int, what: str = "tokens") -> None:
    """check_passes for the sizes `names` of the design `s` (a job's scaling config, its block_size set)."""
    need = {name: largest_budget(s, name) for name in names}
    over = [n for n in names if need[n][1] > MAX_PASSES * tokens]
    if not over:
        return
    worst = max(over, key=lambda n: need[n][1])
    fits = [n for n in need if need[n][1] <= MAX_PASSES * tokens]
    best = max(fits, key=lambda n: need[n][0]) if fits else None
    feed = (
        f"the largest size it can feed is {best} (N {need[best][0]:,}, {need[best][1]:,} {what}, "
        f"{need[best][1] / tokens:.2g} passes): drop the larger sizes "
        f"({' '.join(f'~scaling.sizes.{n}' for n in over)}) or lower their budgets"
        if best
        else "it can feed none of the sweep's sizes: lower their budgets (scaling.budgets, scaling.sizes.SIZE.budgets)"
    )
    raise ConfigError(
        f"the training split has {tokens:,} {what}, too few for this plan: size {worst}'s largest budget "
        f"(N {need[worst][0]:,}, {need[worst][1]:,} {what}) would read it {need[worst][1] / tokens:.3g} times, "
        f"more than the {MAX_PASSES} passes a study allows (repeated data is not fresh data); {feed}, or give a "
        "larger corpus"
    )


def check_window(job: DictConfig) -> None:
    """ConfigError when scaling.block_size (data.block_size, each window's tokens) is longer than model.max_len,
    the longest sequence the models take (a whole-number block_size is check_design's)."""
    block, max_len = job.scaling.get("block_size"), job.model.get("max_len")
    if is_whole(block) and is_whole(max_len) and block > max_len:
        raise ConfigError(
            f"scaling.block_size={block} is longer than model.max_len={max_len}, the longest window the models "
            f"take: lower scaling.block_size to at most {max_len}, or raise model.max_len"
        )


def check_corpus(first: DictConfig, names: list[str]):
    """The corpus check of a sweep, before its other jobs are composed: the design of its first job `first` at
    the sizes `names` its cells name, then the training split against MAX_PASSES at each size's largest budget
    (check_size_passes). Returns the sweep's datamodule, set up. Raises ConfigError."""
    translating = is_translation(first)
    if not translating:  # an LM design is checked before any data is read
        check_window(first)
        check_design(first.scaling, names)
    dm = study_data(first.data)
    if translating:
        set_step_tokens(first, dm)  # a translation design's steps need the data's target tokens a batch
        check_design(first.scaling, names)
    check_size_passes(first.scaling, names, train_tokens(dm), "target tokens" if translating else "tokens")
    return dm
