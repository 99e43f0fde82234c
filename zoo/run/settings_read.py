"""Schedule, mask, position and architecture settings checked against the choices that read them, before any data
is read: a setting the run's choices would not read (decay_start with a cosine, min_lr with noam, model.window
without the sliding mask, model.share_embeddings without an encoder, model.rope_base without RoPE) is refused when
the command line gives it (ConfigError: exit 2, one line naming the setting and what reads it) and warned about
when a config file holds a value other than its default (schedule and mask settings)."""

import logging

from omegaconf import DictConfig, OmegaConf

from zoo.errors import ConfigError

log = logging.getLogger("zoo")

BOUNDS = ("steps", "epochs", "budget", "time")  # what ends a run (run_bound)
MASK_KEYS = ("prefix_len", "window")  # the model fields only a mask reads (zoo.model.blocks.masks.build)
# every task.scheduler key (zoo.training.optim_checks.SCHEDULER_KEYS, but the kind, which chooses) and every
# mask-related model key: {its key: {a choice that reads it: the bounds under which it does}}. A scheduler key's
# choice is task.scheduler.kind, a model key's model.mask (null: the arch's own, causal or bidirectional).
READERS = {
    "task.scheduler.warmup_steps": {"cosine": BOUNDS, "noam": BOUNDS, "wsd": BOUNDS},
    # trainer.max_time alone gives noam and wsd no length to take a share of (a cosine there needs decay_steps)
    "task.scheduler.warmup_fraction": {"cosine": BOUNDS, "noam": BOUNDS[:3], "wsd": BOUNDS[:3]},
    # a cosine over a tokens / flops / time budget decays over the budget's spent share (BudgetCosine)
    "task.scheduler.decay_steps": {"cosine": ("steps", "epochs", "time"), "wsd": BOUNDS},
    "task.scheduler.min_lr": {"cosine": BOUNDS, "wsd": BOUNDS},
    "task.scheduler.decay_start": {"wsd": BOUNDS},
    "task.scheduler.decay_shape": {"wsd": BOUNDS},
    "model.prefix_len": {"prefix": BOUNDS},
    "model.window": {"sliding": BOUNDS},
}
# the values a config file may hold for a key without it counting as set (its defaults); a key not here counts
# as set only when the command line gives it
DEFAULTS = {
    "task.scheduler.warmup_fraction": (None,),
    "task.scheduler.decay_steps": (None,),
    "task.scheduler.min_lr": (None, 0, 0.0),
    "task.scheduler.decay_start": (None,),
    "task.scheduler.decay_shape": (None, "1-sqrt"),
    "model.prefix_len": (0, None),
    "model.window": (128, None),  # zoo.model.ModelConfig's
}
# model keys only some architectures read: {key: the archs (cfg.arch) that read it}. Refused from the command line
# alone: a preset may set one for every family of a sweep (experiment=scaling's share_embeddings)
ARCH_READERS = {
    "model.share_embeddings": ("encoder_decoder",),
    "model.share_tokens": ("encoder_decoder",),
    "model.src_vocab_size": ("encoder_decoder",),
    "model.n_encoder_layers": ("encoder_only", "encoder_decoder"),
    "model.n_decoder_layers": ("decoder_only", "encoder_decoder"),
    "model.pooling": ("encoder_only",),  # the other families classify from their last state
    "model.decoder_start_id": ("encoder_decoder",),  # the first input of a decoder that reads an encoder
}
# model keys only some positions read (zoo.model.config.ModelConfig): {key: the model.position values that read it}
POSITION_READERS = {
    "model.rope_base": ("rope",),
    "model.rel_buckets": ("t5_relative",),
    "model.rel_max_distance": ("t5_relative",),
    "model.position_offset": ("learned",),
    "model.sinusoidal_layout": ("sinusoidal",),
}
# what a user of an arch that does not read the key likely meant
ARCH_HINTS = {
    "model.share_embeddings": "; the LM head's tie to the input embedding is model.tie_embeddings",
    "model.share_tokens": "; the LM head's tie to the input embedding is model.tie_embeddings",
    "model.n_encoder_layers": "; model.n_layers sets its layers",
    "model.n_decoder_layers": "; model.n_layers sets its layers",
}
WHY = {
    ("task.scheduler.decay_steps", "budget"): "it decays over the budget's spent share",
    ("task.scheduler.warmup_fraction", "time"): "trainer.max_time alone gives the run no length to take a share of",
}


def run_bound(cfg: DictConfig) -> str:
    """What ends the run (one of BOUNDS): a tokens / flops / time budget.kind, else trainer.max_steps, else
    trainer.max_epochs, else trainer.max_time alone."""
    if (cfg.get("budget") or {}).get("kind", "steps") in ("tokens", "flops", "time"):
        return "budget"
    steps, epochs = cfg.trainer.get("max_steps"), cfg.trainer.get("max_epochs")
    if isinstance(steps, int) and steps > 0:
        return "steps"
    return "epochs" if epochs not in (None, -1) else "time"


def choice_of(cfg: DictConfig, key: str) -> tuple[str, "str | None"]:
    """(the key that chooses whether `key` is read, its value in cfg)."""
    if key.startswith("task.scheduler."):
        return "task.scheduler.kind", (cfg.task.get("scheduler") or {}).get("kind", "cosine")
    return "model.mask", cfg.model.get("mask")


def unread_message(cfg: DictConfig, key: str, value, bound: str) -> str:
    """The one-line message of a `key`=`value` the run's choice would not read under `bound`."""
    chooser, choice = choice_of(cfg, key)
    shown = "null (the arch's own mask)" if choice is None else choice
    readers = READERS[key]
    if choice in readers:  # read under other bounds
        where = {"budget": f"budget.kind={cfg.budget.kind}", "time": "trainer.max_time alone"}.get(bound, bound)
        return (
            f"{key}={value!r} would change nothing: {chooser}={shown} does not read it under {where} "
            f"({WHY.get((key, bound), 'it has no step count there')}); drop it"
        )
    others = " or ".join(readers)
    return (
        f"{key}={value!r} would change nothing: {chooser}={shown} does not read it ({chooser}={others} does); "
        f"drop it, or set {chooser}={others}"
    )


def check_arch_read(cfg: DictConfig, given: set) -> None:
    """ConfigError for an ARCH_READERS key the command line gives (`given`: its keys) that cfg.arch does not read,
    or a POSITION_READERS key that model.position does not read."""
    _check_read(cfg, given, ARCH_READERS, "arch")
    _check_read(cfg, given, POSITION_READERS, "model.position", fix=True)


def _check_read(cfg: DictConfig, given: set, table: dict, chooser: str, fix: bool = False) -> None:
    """ConfigError for the first key of `table` ({key: the values of `chooser` that read it}) in `given` whose
    run's `chooser` value does not read it; `fix`: the message offers the first reader as the fix."""
    choice = OmegaConf.select(cfg, chooser, default=None)
    for key, readers in table.items():
        if key in given and choice is not None and choice not in readers:
            value = OmegaConf.select(cfg, key)
            advice = f", or set {chooser}={readers[0]}" if fix else ARCH_HINTS.get(key, "")
            raise ConfigError(
                f"{key}={value!r} would change nothing: {chooser}={choice} does not read it ({chooser}="
                f"{' or '.join(readers)} does); drop it{advice}"
            )


def check_settings_read(cfg: DictConfig, overrides) -> None:
    """Every READERS key the run's choices would not read: ConfigError when the command line (`overrides`,
    Hydra's, with or without + / ++) gives it; a logged warning when a config file holds a value outside
    DEFAULTS. Every ARCH_READERS key the run's arch does not read: ConfigError when the command line gives it.
    Reads cfg unresolved where it can: only the keys it checks are resolved."""
    bound = run_bound(cfg)
    given = {str(o).lstrip("+").split("=", 1)[0] for o in overrides}
    check_arch_read(cfg, given)
    for key, readers in READERS.items():
        group, leaf = key.rsplit(".", 1)
        node = OmegaConf.select(cfg, group)
        if not isinstance(node, DictConfig) or leaf not in node:
            continue
        if bound in readers.get(choice_of(cfg, key)[1], ()):
            continue
        value = node.get(leaf)
        if key in given:
            raise ConfigError(unread_message(cfg, key, value, bound))
        if key in DEFAULTS and value not in DEFAULTS[key]:
            log.warning("%s (it comes from a config file)", unread_message(cfg, key, value, bound))
