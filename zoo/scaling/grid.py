"""experiment=scaling's grid (conf/experiment/scaling.yaml): the resolvers that turn a cell (`s2_seed3`) and a
size into a model shape and a step budget. The plan printed before anything trains: zoo.run.scaling_plan."""

import math
import re

from omegaconf import OmegaConf

from zoo.errors import ConfigError, is_whole
from zoo.model import ModelConfig, build_model
from zoo.model.cost import non_embedding_param_count

CELL = re.compile(r"^(?P<size>[A-Za-z0-9]+)_seed(?P<seed>[0-9]+)$")


def cell_size(cell: str, sizes=None) -> str:
    """ "s2_seed3" -> "s2". Raises ConfigError for a cell not written SIZE_seedN, or whose size is not a key of
    `sizes` (scaling.sizes) when given."""
    size = _cell(cell)["size"]
    if sizes is not None and size not in sizes:
        raise ConfigError(
            f"scaling.cell={cell!r} names size {size!r}, which scaling.sizes does not define; "
            f"pick one of {', '.join(sizes)} (or add {size} to scaling.sizes)"
        )
    return size


def cell_seed(cell: str) -> int:
    """ "s2_seed3" -> 3."""
    return int(_cell(cell)["seed"])


def _cell(cell) -> dict:
    m = CELL.match(str(cell))
    if m is None:
        raise ConfigError(f"scaling.cell={cell!r} must be SIZE_seedN, e.g. s2_seed1 (a key of scaling.sizes)")
    return m.groupdict()


def cells(sizes, seed_size: str, seeds: int) -> str:
    """The swept cells, smallest size first: SIZE_seed1 for every size, and seeds 2 .. `seeds` at seed_size."""
    names = list(sizes)
    if seed_size not in names:
        raise ConfigError(f"scaling.seed_size={seed_size} is not a key of scaling.sizes ({', '.join(names)})")
    if not is_whole(seeds) or seeds < 1:
        raise ConfigError(f"scaling.seeds={seeds!r} must be a positive whole number")
    out = []
    for name in names:
        out += [f"{name}_seed{s}" for s in range(1, (seeds if name == seed_size else 1) + 1)]
    return ",".join(out)


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


def size_non_embedding(size) -> int:
    """Non-embedding parameters of decoder_only at a size ({d_model, n_heads, n_layers}): the N of its tokens
    per parameter, the same for every architecture at that size."""
    cfg = ModelConfig(
        vocab_size=2,
        d_model=size["d_model"],
        n_heads=size["n_heads"],
        n_layers=size["n_layers"],
        d_ff=d_ff("", size["d_model"]),
    )
    return non_embedding_param_count(build_model("decoder_only", cfg))


def steps(size, tokens_per_param, batch_size: int, block_size: int, every=None) -> int:
    """Optimizer steps to read tokens_per_param x N tokens (N: size_non_embedding) at batch_size x block_size
    tokens a step, as a whole number of evaluation intervals of `every` tokens per parameter (default: one
    interval). Raises ConfigError for a budget that is not a multiple of the interval."""
    every = every or tokens_per_param
    if tokens_per_param % every:
        raise ConfigError(
            f"scaling.max_tokens_per_param={tokens_per_param} must be a multiple of scaling.eval_every={every}"
        )
    interval = max(1, math.ceil(every * size_non_embedding(size) / (batch_size * block_size)))
    return interval * round(tokens_per_param / every)


def min_lr(decay_to, lr: float) -> float:
    """The schedule's final learning rate: lr (constant after the warm-up: every evaluation reads off one budget)
    when decay_to is None, else decay_to (a cosine decay over the run: separately trained budgets)."""
    return lr if decay_to is None else float(decay_to)


for _name, _fn in (
    ("zoo_cell_size", cell_size),
    ("zoo_cell_seed", cell_seed),
    ("zoo_scaling_cells", cells),
    ("zoo_scaling_layers", layers),
    ("zoo_scaling_d_ff", d_ff),
    ("zoo_scaling_steps", steps),
    ("zoo_scaling_min_lr", min_lr),
):
    OmegaConf.register_new_resolver(_name, _fn, replace=True)
