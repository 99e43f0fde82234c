"""experiment=scaling's sizes and budgets: a size's seeds, matched shapes, parameter count and budget steps."""

import functools
from dataclasses import dataclass

from zoo.errors import ConfigError, is_whole
from zoo.model import ModelConfig, build_model
from zoo.model.cost import non_embedding_param_count

SIZE_KEYS = ("d_model", "n_heads", "n_layers", "batch_size", "lr")  # required; a size may also set budgets, seeds
OPTIONAL_SIZE_KEYS = ("budgets", "seeds", "lr_grid")  # lr_grid: the tuning stage's rates (with lr: tuned)
TUNED = "tuned"  # a size's lr: each family's best rate of the tuning stage (zoo.scaling.tune)


def size_seeds(name: str, size, seed_size: str, seeds: int) -> int:
    """The seeds of a size: its own `seeds` when it sets them, else `seeds` at seed_size and 1 elsewhere."""
    own = size.get("seeds") if hasattr(size, "get") else None
    if own is not None:
        if not is_whole(own) or own < 1:
            raise ConfigError(f"scaling.sizes.{name}.seeds={own!r} must be a positive whole number")
        return int(own)
    return int(seeds) if name == seed_size else 1


def layers(arch: str, n_layers: int) -> int:
    """The layers of `arch` at a size of n_layers: encoder_decoder has n_layers / 2 a side (so the parameter
    counts match with d_ff 3 d_model: 10 d^2 + 14 d^2 per encoder + decoder pair = 2 x 12 d^2)."""
    if arch != "encoder_decoder":
        return n_layers
    if n_layers % 2:
        raise ConfigError(
            f"a scaling size has n_layers={n_layers}: encoder_decoder splits it in halves; use an even number"
        )
    return n_layers // 2


def d_ff(arch: str, d_model: int) -> int:
    """4 d_model; encoder_decoder 3 d_model (matched parameter counts, `layers`)."""
    return 3 * d_model if arch == "encoder_decoder" else 4 * d_model


FAMILY_MODELS = {"prefix_lm": ("decoder_only", "prefix")}  # a family built as another arch with its mask


def family_model(arch: str, d_model: int, n_heads: int, n_layers: int, vocab_size: int = 2, **config):
    """The nn.Module of a family at a size's shape: layers(arch, n_layers) and d_ff(arch, d_model), as the study
    matches them; prefix_lm is decoder_only with model.mask=prefix. `config`: further ModelConfig fields."""
    model_arch, mask = FAMILY_MODELS.get(arch, (arch, None))
    cfg = ModelConfig(
        vocab_size=vocab_size,
        d_model=d_model,
        n_heads=n_heads,
        n_layers=layers(arch, n_layers),
        d_ff=d_ff(arch, d_model),
        mask=mask,
        **config,
    )
    return build_model(model_arch, cfg)


def size_non_embedding(size) -> int:
    """Non-embedding parameters of decoder_only at a size ({d_model, n_heads, n_layers}): the N of its tokens
    per parameter, the same for every architecture at that size. Counted once per shape (_non_embedding)."""
    return _non_embedding(int(size["d_model"]), int(size["n_heads"]), int(size["n_layers"]))


@functools.cache
def _non_embedding(d_model: int, n_heads: int, n_layers: int) -> int:
    """size_non_embedding of one shape: built once, not at every resolver, plan row and check that asks (a
    101 M-parameter size takes seconds to build)."""
    cfg = ModelConfig(vocab_size=2, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff("", d_model))
    return non_embedding_param_count(build_model("decoder_only", cfg))


@dataclass(frozen=True)
class Branch:
    """One budget of a size: `tokens_per_param` b, the trunk step its cool-down starts from (`start`) and the step
    it ends at (`end`, the budget: round(b N / tokens a step)). A cosine check cell trains 0 .. end alone."""

    tokens_per_param: float
    start: int
    end: int


def step_tokens(size, block_size: int) -> int:
    """Tokens an optimizer step reads at a size: its batch_size (windows) x block_size."""
    return int(size["batch_size"]) * int(block_size)


def warmup_steps(size, warmup_tokens_per_param: float, block_size: int) -> int:
    """The warm-up of a size in steps: warmup_tokens_per_param x N tokens (Porian et al. 2024 warm up over N
    tokens), at least 1."""
    return max(1, round(warmup_tokens_per_param * size_non_embedding(size) / step_tokens(size, block_size)))


def size_budgets(size, budgets) -> list[float]:
    """A size's budgets (tokens per non-embedding parameter), smallest first: its own `budgets` when it sets them,
    else the study's (scaling.budgets)."""
    return sorted(float(x) for x in (size.get("budgets") or budgets))


def middle_budget(size, budgets) -> float:
    """The budget a size's rates are tuned at: the middle of its budgets (of an even count, the lower middle, so
    [5, 10, 20] -> 10 and [50, 100, 200, 400] -> 100)."""
    own = size_budgets(size, budgets)
    return own[(len(own) - 1) // 2]


def branches(size, budgets, cooldown: float, block_size: int) -> list[Branch]:
    """The budgets of a size (size_budgets), smallest first, as Branch (start, end) steps."""
    n, per_step = size_non_embedding(size), step_tokens(size, block_size)
    out = []
    for b in size_budgets(size, budgets):
        end = round(b * n / per_step)
        out.append(Branch(b, round((1.0 - cooldown) * end), end))
    return out
