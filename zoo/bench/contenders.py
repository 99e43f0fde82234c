"""What runs in each comparison: a Contender (zoo's models and their peers, built at the same shape: the decoder-only
ones in zoo.bench.lm_contenders, the encoder-decoder ones in zoo.bench.seq2seq_contenders), and the timed training
step of each.

A Contender is a name, a builder and a forward adapter (model, inputs -> logits), so that one training
step (zoo.bench.steps.train_step) drives them all. Third-party peers come from the optional `bench`
extra (pip install -e .[bench]: Hugging Face transformers, x-transformers, versions pinned in
pyproject.toml); where a package does not import, the contender has `missing` set and its table rows say
so. Each peer is matched to zoo as closely as its options allow; what still differs is its `note`.
"""

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from zoo.bench.report import NOT_INSTALLED
from zoo.bench.steps import initial_loss, train_step


@dataclass
class Contender:
    """name: the table label. build() -> nn.Module on the CPU (None when `missing`). forward(model,
    *inputs) -> logits (B, T, V) for training: inputs are (idx,) for LMs, (src, tgt) for seq2seq.
    note: how it differs from zoo's model. missing: why it cannot run (package not importable).
    loss(model, *inputs, targets) -> scalar: the contender's own standard training loss (zoo: the chunked
    LM head + cross-entropy of zoo.model.loss.chunked_ce); None = cross-entropy of forward's logits."""

    name: str
    build: Callable[[], nn.Module] | None
    forward: Callable[..., torch.Tensor]
    note: str = ""
    missing: str | None = None
    loss: Callable[..., torch.Tensor] | None = None


def count_params(model: nn.Module) -> int:
    """Trainable parameters, tied weights counted once (frozen tables such as Marian's sinusoidal
    positions are left out: zoo keeps those in buffers)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


_IMPORT_ERRORS: dict[str, str | None] = {}


def import_error(module: str) -> str | None:
    """None if `module` imports, else the NOT_INSTALLED text (ImportError) or the error that broke it."""
    if module not in _IMPORT_ERRORS:
        try:
            importlib.import_module(module)
            _IMPORT_ERRORS[module] = None
        except ImportError:
            _IMPORT_ERRORS[module] = NOT_INSTALLED
        except Exception as e:  # a broken install must not crash the benchmark either
            _IMPORT_ERRORS[module] = f"import failed: {type(e).__name__}: {e}"
    return _IMPORT_ERRORS[module]


def quiet_transformers() -> None:
    """Silence Hugging Face's advisory logs and deprecation warnings (they would fill the report)."""
    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", category=UserWarning, module="transformers")


def notes_lines(contenders: list[Contender]) -> list[str]:
    """Markdown bullet lines '- name: note' for the contenders that have a note."""
    return [f"- {c.name}: {c.note}." for c in contenders if c.note]


COMPILED_NOTE = "; every contender compiled alike, torch.compile(model) (the shared loss stays eager)"


def label(name: str, compile: bool) -> str:
    """A contender's table name: `name`, with ' (compiled)' when it runs under torch.compile."""
    return name + (" (compiled)" if compile else "")


def training_steps(
    contenders: list[Contender], inputs: tuple, targets, precision: str, device: str, compile: bool = False
):
    """Build each installed contender from torch.manual_seed(0) and its timed training step on `inputs`
    (idx,) or (src, tgt) against targets (B, T). compile: every contender, zoo's included, runs through
    torch.compile(model) (the whole forward; zoo's model.compile_scope=model also compiles the loss, which
    here stays the shared eager one); names get ' (compiled)'. Compilation happens in the first (warm-up)
    step.
    Returns (steps {name: closure}, params {name: count}, loss0 {name: initial loss, nats},
    missing {name: why it cannot run})."""
    steps, params, loss0, missing = {}, {}, {}, {}
    for c in contenders:
        name = label(c.name, compile)
        if c.missing:
            missing[name] = c.missing
            continue
        torch.manual_seed(0)
        model = c.build().to(device).train()
        params[name] = count_params(model)
        loss0[name] = initial_loss(model, (lambda f: lambda m: f(m, *inputs))(c.forward), targets)
        runs = torch.compile(model) if compile else model
        own = None if c.loss is None else (lambda f, r: lambda m: f(r, *inputs, targets))(c.loss, runs)
        steps[name] = train_step(
            model, (lambda f, r: lambda m: f(r, *inputs))(c.forward, runs), targets, precision, loss_fn=own
        )
    return steps, params, loss0, missing
