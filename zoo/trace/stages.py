"""One forward pass of a zoo model as stages (zoo.trace.hooks.trace makes them): every box of the Transformer's
diagram (docs/architectures.md) with the module that computes it, its input and output shapes with named axes,
its values, the masks and per-head attention weights, and its FLOPs and activation bytes (zoo.model.cost).
`select` picks stages by name (--only), `to_json` writes them (trace.json).
"""

from dataclasses import dataclass, field

import torch

PARTS = ("self_attn", "cross_attn", "ffn")  # a layer's sublayers, in order


@dataclass
class Stage:
    """One stage of the forward pass. Tensors keep the batch axis (B = 1 in a trace).

    name: its id (--only, trace.json); title: the diagram's box and what the stage does; module: the class
    that computes it and its file. input / output: the tensors in and out, axes: their axis names.
    parts: more named tensors of the stage ({"Q": ..., "K": ..., "V": ...}), each with its axes.
    mask: (T_q, T_k) 0/1, the mask attention applied (1 = may attend), rows / cols: its token labels.
    weights: (heads, T_q, T_k), the attention weights per head. flops: from zoo.model.cost (None = a stage the
    cost model does not count: norms, softmax, lookups); activation_bytes likewise (Korthikanti et al. 2022).
    topk: per position [(token, probability), ...] (the output stage)."""

    name: str
    title: str
    module: str
    input: torch.Tensor
    output: torch.Tensor
    input_axes: tuple[str, ...]
    output_axes: tuple[str, ...]
    rows: list[str] = field(default_factory=list)
    parts: dict = field(default_factory=dict)  # name -> (tensor, axes)
    mask: torch.Tensor | None = None
    cols: list[str] = field(default_factory=list)
    weights: torch.Tensor | None = None
    flops: int | None = None
    activation_bytes: int | None = None
    topk: list | None = None
    note: str = ""


@dataclass
class Trace:
    """The stages of one forward, the logits it returned (B, T, V) and its inputs' token labels."""

    arch: str
    stages: list[Stage]
    logits: torch.Tensor
    labels: dict  # "src" / "tgt" / "seq": the token labels of each input
    vocab: list[str]  # the label of each output id

    @property
    def total_flops(self) -> int:
        return sum(s.flops or 0 for s in self.stages)

    @property
    def total_activation_bytes(self) -> int:
        return sum(s.activation_bytes or 0 for s in self.stages)

    def names(self) -> list[str]:
        return [s.name for s in self.stages]


# the input and output axes of a stage on the residual stream
RESIDUAL_AXES = (("B", "T", "d_model"), ("B", "T", "d_model"))


def select(tr: Trace, only: list[str] | None) -> list[Stage]:
    """The stages named in `only` (a name, or a dotted prefix of names: encoder.0.self_attn), in trace order;
    all when only is None. Raises ValueError naming an unknown one and the known names."""
    if not only:
        return tr.stages
    names = tr.names()
    unknown = [o for o in only if not any(n == o or n.startswith(o + ".") for n in names)]
    if unknown:
        raise ValueError(
            f"--only {','.join(unknown)}: no such stage in this trace; its stages are: {', '.join(names)} "
            f"(--list prints them; a prefix such as {names[-3].rsplit('.', 1)[0]} picks a group)"
        )
    return [s for s in tr.stages if any(s.name == o or s.name.startswith(o + ".") for o in only)]


def to_json(tr: Trace, stages: list[Stage], model_cfg: dict) -> dict:
    """trace.json: {"arch", "model", "tokens", "stages": [{"name", "title", "module", "input_shape",
    "output_shape", "input_axes", "output_axes", "values", "parts", "mask", "weights", "flops",
    "activation_bytes", "topk"}], "total_flops", "total_activation_bytes"}; shapes are lists of ints."""

    def tensor(t: torch.Tensor):
        return t.detach().float().tolist() if t.is_floating_point() else t.detach().tolist()

    out = []
    for s in stages:
        item = {
            "name": s.name,
            "title": s.title,
            "module": s.module,
            "input_shape": [int(n) for n in s.input.shape],
            "output_shape": [int(n) for n in s.output.shape],
            "input_axes": list(s.input_axes),
            "output_axes": list(s.output_axes),
            "values": tensor(s.output),
            "parts": {
                k: {"shape": [int(n) for n in t.shape], "axes": list(ax), "values": tensor(t)}
                for k, (t, ax) in s.parts.items()
            },
            "flops": s.flops,
            "activation_bytes": s.activation_bytes,
        }
        if s.mask is not None:
            item["mask"] = {"rows": s.rows, "cols": s.cols, "values": tensor(s.mask)}
        if s.weights is not None:
            item["weights"] = {"rows": s.rows, "cols": s.cols, "values": tensor(s.weights)}
        if s.topk is not None:
            item["topk"] = [
                {"position": r, "top": [{"token": t, "p": p} for t, p in top]} for r, top in zip(s.rows, s.topk)
            ]
        out.append(item)
    return {
        "arch": tr.arch,
        "model": model_cfg,
        "tokens": tr.labels,
        "stages": out,
        "total_flops": tr.total_flops,
        "total_activation_bytes": tr.total_activation_bytes,
    }
