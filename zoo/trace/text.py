"""The text of `python -m zoo.trace`: each stage of a zoo.trace.stages.Trace as plain text or with rich's rules
and tables. Both print the same blocks (lines and token-labelled matrices), built once by `blocks`."""

import math
import unicodedata

import torch

from zoo.model import ModelConfig
from zoo.trace.stages import Stage, Trace

VALUE_LIMIT = 256  # a tensor's values are printed up to this many numbers (--values prints every one)
DECIMALS = 2


def shape(t: torch.Tensor, axes) -> str:
    """'[1, 3, 4] (B, T, d_model)': the shape as a list of ints and its axes' names."""
    return f"{list(int(n) for n in t.shape)} ({', '.join(axes)})"


def number(x: float) -> str:
    if math.isinf(x):
        return "-inf" if x < 0 else "inf"
    s = f"{x:.{DECIMALS}f}"
    return "0.00" if s == "-0.00" else s


def count(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def _matrices(name: str, t: torch.Tensor, axes, rows: list[str], cols: list[str] | None) -> list[tuple]:
    """A tensor as matrix blocks: the batch (or leading 1) axis dropped, a (heads, T, X) tensor one matrix per
    head; rows labelled by tokens when they are the T axis, columns by `cols` or by index."""
    t = t.detach()
    ax = list(axes)
    while t.dim() > 2 and t.shape[0] == 1 and ax and ax[0] in ("B", "1"):
        t, ax = t[0], ax[1:]
    if t.dim() == 3 and t.shape[0] == 1 and ax and ax[0] in ("B", "1"):
        t, ax = t[0], ax[1:]
    if t.dim() == 1:
        t, ax = t.unsqueeze(0), ["", *ax]
    if t.dim() == 2:
        groups = [(name, t)]
    elif t.dim() == 3:
        axis = {"heads": "head", "kv_heads": "kv head"}.get(ax[0], ax[0])
        groups = [(f"{name}, {axis} {i}", t[i]) for i in range(t.shape[0])]
        ax = ax[1:]
    else:
        return [("line", f"{name}: {t.numel()} values of {t.dim()} axes (trace.json has them)")]
    out = []
    for title, m in groups:
        row_labels = rows if len(rows) == m.shape[0] else [str(i) for i in range(m.shape[0])]
        col_labels = cols if cols and len(cols) == m.shape[1] else [str(j) for j in range(m.shape[1])]
        fmt = number if m.is_floating_point() else (lambda v: str(int(v)))
        cells = [[fmt(float(v)) for v in r] for r in m.tolist()]
        out.append(("matrix", title, row_labels, col_labels, cells))
    return out


def blocks(s: Stage, values: bool | None) -> list[tuple]:
    """The blocks of one stage: ("line", text) and ("matrix", title, row labels, column labels, cells).
    values: True = every tensor's values, False = none, None = those up to VALUE_LIMIT numbers."""
    out = [
        ("line", f"module   {s.module}"),
        ("line", f"shape    {shape(s.input, s.input_axes)} -> {shape(s.output, s.output_axes)}"),
    ]
    for k, (t, ax) in s.parts.items():
        out.append(("line", f"         {k}: {shape(t, ax)}"))
    if s.note:
        out.append(("line", f"         {s.note}"))
    out.append(("line", f"cost     {count(s.flops)} FLOPs, {count(s.activation_bytes)} activation bytes"))

    def show(t: torch.Tensor) -> bool:
        return values is True or (values is None and t.numel() <= VALUE_LIMIT)

    if s.mask is not None:
        out += _matrices("mask (1 = may attend; rows: queries, columns: keys)", s.mask, ("T_q", "T_k"), s.rows, s.cols)
    if s.weights is not None:
        out += _matrices("attention weights", s.weights, ("head", "T_q", "T_k"), s.rows, s.cols)
    elif s.topk is not None:
        width = max(len(s.topk[0]), 1)
        cells = [[f"{t} {p:.{DECIMALS}f}" for t, p in top] for top in s.topk]
        out.append(
            ("matrix", "top tokens per position (token probability)", s.rows, [str(i + 1) for i in range(width)], cells)
        )
    elif values is not False:
        shown = [("values", (s.output, s.output_axes))] if not any(t is s.output for t, _ in s.parts.values()) else []
        for k, (t, ax) in [*shown, *s.parts.items()]:
            if show(t):
                cols = s.cols if ax[-1] == "T_k" else None
                rows = s.cols if len(ax) > 1 and ax[-2] == "S" else s.rows  # K, V of cross-attention: the memory's
                out += _matrices(k, t, ax, rows, cols)
            else:
                out.append(("line", f"{k}: {t.numel()} numbers, over {VALUE_LIMIT} (--values prints them)"))
    return out


def model_line(arch: str, cfg: ModelConfig) -> str:
    """The header's description of the model: sizes, layers, activation, norm, positions, mask."""

    def n(count: int, kind: str) -> str:
        return f"{count} {kind} layer{'s' if count != 1 else ''}"

    layers = {
        "encoder_decoder": f"{n(cfg.encoder_layers, 'encoder')} + {n(cfg.decoder_layers, 'decoder')}",
        "decoder_only": n(cfg.decoder_layers, "decoder"),
        "encoder_only": n(cfg.encoder_layers, "encoder"),
    }[arch]
    kv = f", {cfg.kv_heads} kv heads" if cfg.kv_heads != cfg.n_heads else ""
    mask = cfg.mask or {"encoder_decoder": "causal", "decoder_only": "causal", "encoder_only": "bidirectional"}[arch]
    return (
        f"vocab {cfg.vocab_size}, d_model {cfg.d_model}, {cfg.n_heads} heads (d_k {cfg.head_dim}){kv}, "
        f"d_ff {cfg.d_ff}, {layers}, {cfg.activation}, {cfg.norm} {'pre' if cfg.norm_first else 'post'}-LN, "
        f"{cfg.position} positions, {mask} mask"
    )


def header(tr: Trace, model_line: str) -> list[str]:
    lines = [f"zoo.trace: {tr.arch}, {model_line}"]
    for side, labels in tr.labels.items():
        lines.append(f"  {side}: {' '.join(labels)}")
    return lines


def totals(tr: Trace, stages: list[Stage]) -> list[str]:
    shown = len(stages) < len(tr.stages)
    lines = [
        f"total    {count(tr.total_flops)} FLOPs (zoo.model.cost.forward_flops), "
        f"{count(tr.total_activation_bytes)} activation bytes (Korthikanti et al. 2022, 16-bit)"
    ]
    if shown:
        lines.append(
            f"shown    {count(sum(s.flops or 0 for s in stages))} FLOPs, "
            f"{count(sum(s.activation_bytes or 0 for s in stages))} activation bytes in the {len(stages)} stages shown"
        )
    lines.append("         (- = not in the cost model: lookups, norms, softmax, additions, cross-attention memory)")
    return lines


def width(text: str) -> int:
    """Terminal columns of text: East Asian wide and full-width characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, n: int, right: bool = False) -> str:
    fill = " " * max(0, n - width(text))
    return fill + text if right else text + fill


def plain_matrix(title: str, rows: list[str], cols: list[str], cells: list[list[str]], indent: str = "  ") -> str:
    """A matrix as aligned plain text, its title above, row labels on the left, column labels on top."""
    lw = max([width(r) for r in rows] + [0])
    widths = [max(width(c), *(width(r[j]) for r in cells)) for j, c in enumerate(cols)]
    lines = [f"{indent}{title}", indent + " " * lw + "  " + "  ".join(pad(c, w, True) for c, w in zip(cols, widths))]
    for label, r in zip(rows, cells):
        lines.append(indent + pad(label, lw) + "  " + "  ".join(pad(v, w, True) for v, w in zip(r, widths)))
    return "\n".join(lines)


def render_plain(tr: Trace, stages: list[Stage], values: bool | None, model_line: str) -> str:
    out = header(tr, model_line)
    for s in stages:
        out.append("")
        out.append(f"== {s.name}: {s.title}")
        for b in blocks(s, values):
            out.append(f"  {b[1]}" if b[0] == "line" else plain_matrix(*b[1:], indent="  "))
    out.append("")
    out += totals(tr, stages)
    return "\n".join(out)


def render_rich(tr: Trace, stages: list[Stage], values: bool | None, model_line: str, console) -> None:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    for line in header(tr, model_line):
        console.print(Text(line))
    for s in stages:
        console.rule(Text.assemble((s.name, "bold cyan"), ": ", s.title), align="left")
        for b in blocks(s, values):
            if b[0] == "line":
                console.print(Text(b[1]))
                continue
            _, title, rows, cols, cells = b
            table = Table(title=title, box=box.SIMPLE, title_justify="left", pad_edge=False)
            table.add_column("", style="bold")
            for c in cols:
                table.add_column(c, justify="right")
            for label, r in zip(rows, cells):
                table.add_row(label, *r)
            console.print(table)
    console.rule()
    for line in totals(tr, stages):
        console.print(Text(line))


def stage_list(tr: Trace) -> str:
    """--list: every stage name and its title."""
    w = max(len(n) for n in tr.names())
    return "\n".join(f"{s.name.ljust(w)}  {s.title}" for s in tr.stages)
