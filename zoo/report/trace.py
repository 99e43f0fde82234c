"""One forward pass of a zoo model, stage by stage (`python -m zoo.trace`): every box of the Transformer's
diagram (docs/architectures.md) with the module that computes it, its input and output shapes with named axes,
its values, the masks and per-head attention weights, and its FLOPs and activation bytes (zoo.model.cost).

Everything is read from the model's own forward: forward hooks on its modules and, for what happens inside
attention (q, k, v per head, the scores, the mask, the weights), zoo.model.blocks.attention.record_trace. No stage is
computed here a second time, except the Softmax over the logits (the model returns logits; the probabilities
are softmax(logits)). The hooks only read: the logits are the same, bit for bit, as without the trace.
"""

import inspect
import itertools
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from zoo.model.blocks.attention import MultiHeadAttention, record_trace
from zoo.model.cost import forward_flops_by_stack, layer_activation_bytes, layer_flops
from zoo.model.decoder_only import DecoderOnly
from zoo.model.encoder_decoder import EncoderDecoder
from zoo.model.encoder_only import EncoderOnly

ARCH_OF = {EncoderOnly: "encoder_only", DecoderOnly: "decoder_only", EncoderDecoder: "encoder_decoder"}
_PARTS = ("self_attn", "cross_attn", "ffn")


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


def where(module: nn.Module | type, attr: str = "") -> str:
    """'Class.attr (zoo/model/file.py)' for a zoo module, 'nn.Class (torch.nn)' for one of torch's."""
    cls = module if isinstance(module, type) else type(module)
    name = f"{cls.__name__}.{attr}" if attr else cls.__name__
    if cls.__module__.startswith("torch."):
        return f"nn.{name} (torch.nn)"
    return f"{name} ({module_file(cls)})"


def module_file(cls: type) -> str:
    """The file that defines cls, relative to the folder its top-level package lies in ('zoo/model/x.py'),
    wherever that folder is (a clone named zoo, site-packages); the module's import path if it has no file."""
    top = sys.modules.get(cls.__module__.split(".")[0])
    source = inspect.getsourcefile(cls)
    if top is None or not getattr(top, "__file__", None) or source is None:
        return cls.__module__
    root = Path(top.__file__).resolve().parent.parent
    try:
        return Path(source).resolve().relative_to(root).as_posix()
    except ValueError:  # defined outside its package's folder
        return cls.__module__


class _Hooks:
    """Forward hooks that keep (args, kwargs, output) of every call of the modules they watch, in call order."""

    def __init__(self):
        self.calls: dict[int, list] = {}
        self.handles = []

    def watch(self, *modules: nn.Module | None) -> None:
        for m in modules:
            if m is None or id(m) in self.calls:
                continue
            self.calls[id(m)] = []
            self.handles.append(m.register_forward_hook(self._hook, with_kwargs=True))

    def _hook(self, module, args, kwargs, output):
        self.calls[id(module)].append((args, kwargs, output))

    def get(self, module: nn.Module, i: int = 0):
        """(args, kwargs, output) of the module's i-th call."""
        return self.calls[id(module)][i]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _call_model(model, arch: str, inputs: dict) -> torch.Tensor:
    """The model's own forward on the trace's inputs: logits (B, T, V)."""
    pad = {k: inputs.get(f"{k}_key_padding_mask") for k in ("src", "tgt", "seq")}
    if arch == "encoder_decoder":
        return model(inputs["src"], inputs["tgt"], src_key_padding_mask=pad["src"], tgt_key_padding_mask=pad["tgt"])
    if arch == "decoder_only":
        return model(inputs["seq"], key_padding_mask=pad["seq"], prefix_len=inputs.get("prefix_len"))
    return model(inputs["seq"], key_padding_mask=pad["seq"])


def run_model(model, inputs: dict) -> torch.Tensor:
    """The logits of the model on the trace's inputs, without any trace (for the bit-identity check)."""
    with torch.no_grad():
        return _call_model(model, ARCH_OF[type(model)], inputs)


@torch.no_grad()
def trace(model, inputs: dict, labels: dict, vocab: list[str], top_k: int = 3) -> Trace:
    """Run model (eval mode) once on `inputs` and return its stages.

    inputs: encoder_decoder {"src": (1, S), "tgt": (1, T)} long (tgt shifted right, start token first);
    decoder_only {"seq": (1, T), "prefix_len": int or None (model.mask=prefix)}; encoder_only {"seq": (1, T)};
    each may come with "<name>_key_padding_mask" (1, T) bool, True = padding, the model's key_padding_mask.
    labels: the token labels of each input ("src", "tgt", "seq"); vocab: the label of each output id.
    Raises TypeError for a model that is not one of zoo's three architectures."""
    if type(model) not in ARCH_OF:
        raise TypeError(f"trace needs a zoo EncoderOnly / DecoderOnly / EncoderDecoder, got {type(model).__name__}")
    arch = ARCH_OF[type(model)]
    hooks = _Hooks()
    stacks = [s for s in (getattr(model, "encoder", None), getattr(model, "decoder", None)) if s is not None]
    embeds = [getattr(model, n, None) for n in ("src_embed", "tgt_embed", "embed")]
    for emb in embeds:
        if emb is not None:
            hooks.watch(emb, emb.tok, emb.pos)
    hooks.watch(model.rope, model.alibi, model.lm_head)
    for stack in stacks:
        hooks.watch(stack.norm, stack.rel_bias)
        for layer in stack.layers:
            hooks.watch(layer, layer.ffn.linear2)
            for part in _PARTS:
                if getattr(layer, part) is not None:
                    hooks.watch(getattr(layer, part), getattr(layer, part + "_sub").norm)
                    if part != "ffn":
                        hooks.watch(getattr(layer, part).out_proj)
    try:
        with record_trace(model) as mods:
            logits = _call_model(model, arch, inputs)
            records = {id(m): dict(m.trace_record) for m in mods}
    finally:
        hooks.remove()
    builder = _Builder(model, arch, hooks, records, labels, vocab)
    return Trace(arch, builder.stages(logits, top_k), logits, labels, vocab)


class _Builder:
    """Turns the hooks' calls and the attention records of one forward into Stages."""

    def __init__(self, model, arch, hooks: _Hooks, records: dict, labels: dict, vocab: list[str]):
        self.model, self.arch, self.hooks, self.records, self.labels, self.vocab = (
            model,
            arch,
            hooks,
            records,
            labels,
            vocab,
        )
        self.cfg = model.cfg
        self.out: list[Stage] = []
        self.embed_calls: dict[int, int] = {}

    def stages(self, logits: torch.Tensor, top_k: int) -> list[Stage]:
        m, arch = self.model, self.arch
        if arch == "encoder_decoder":
            S, T = self.labels_len("src"), self.labels_len("tgt")
            self.side("src", m.src_embed, 0, "Input Embedding")
            self.stack("encoder", m.encoder, 0, "src", "src", S, None)
            self.side("tgt", m.tgt_embed, 1, "Output Embedding")
            self.stack("decoder", m.decoder, 1, "tgt", "tgt", T, S)
            rows = self.labels["tgt"]
        else:
            stack = m.encoder if arch == "encoder_only" else m.decoder
            name = "encoder" if arch == "encoder_only" else "decoder"
            T = self.labels_len("seq")
            self.side("", m.embed, 0, "Input Embedding")
            self.stack(name, stack, 0, "seq", "seq", T, None)
            rows = self.labels["seq"]
        self.head(logits, rows, top_k)
        return self.out

    def labels_len(self, side: str) -> int:
        return len(self.labels[side])

    def add(self, stage: Stage) -> Stage:
        self.out.append(stage)
        return stage

    # -- embedding and positions ------------------------------------------------------------------------------
    def side(self, prefix: str, emb, call: int, box: str) -> None:
        """The embedding stages of one input: tokens, positions, their sum. call: which call of a shared
        module (the encoder's comes first)."""
        i = self.embed_calls.get(id(emb), 0)
        self.embed_calls[id(emb)] = i + 1
        (idx, positions), _, x = self.hooks.get(emb, i)
        rows = self.labels[prefix or "seq"]
        p = f"{prefix}_" if prefix else ""
        tok = self.hooks.get(emb.tok, i)[2]
        self.add(
            Stage(
                f"{p}embedding",
                f"{box}: each token id -> its row of the embedding table",
                where(emb.tok) + " in " + where(emb),
                idx,
                tok,
                ("B", "T"),
                ("B", "T", "d_model"),
                rows,
            )
        )
        self.positions(p, emb, i, call, positions, rows)
        scale = f" x sqrt(d_model) = x {emb.scale:.3g}" if emb.scale != 1.0 else ""
        extras = (" + token type 0" if emb.types is not None else "") + (" -> norm" if emb.norm is not None else "")
        added = " + positional encoding" if emb.pos is not None else ""
        self.add(
            Stage(
                f"{p}input",
                f"{box}{scale}{added}{extras}: what the first layer reads",
                where(emb),
                idx,
                x,
                ("B", "T"),
                ("B", "T", "d_model"),
                rows,
            )
        )

    def positions(self, p: str, emb, i: int, call: int, positions: torch.Tensor, rows: list[str]) -> None:
        m = self.model
        if emb.pos is not None:
            pe = self.hooks.get(emb.pos, i)[2]
            kind = "sinusoid PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...)"
            if self.cfg.position == "learned":
                kind = "a learned row per position"
            self.add(
                Stage(
                    f"{p}positions",
                    f"Positional Encoding: {kind}",
                    where(emb.pos),
                    positions,
                    pe,
                    ("B", "T"),
                    ("B", "T", "d_model"),
                    rows,
                )
            )
        elif m.rope is not None:
            cos, sin = self.hooks.get(m.rope, call)[2]
            self.add(
                Stage(
                    f"{p}positions",
                    "Positional Encoding (RoPE): angles pos * theta_i that rotate each pair of q and k in attention",
                    where(m.rope),
                    positions,
                    cos,
                    ("B", "T"),
                    ("B", "1", "T", "d_k/2"),
                    rows,
                    parts={"cos": (cos, ("B", "1", "T", "d_k/2")), "sin": (sin, ("B", "1", "T", "d_k/2"))},
                )
            )
        elif m.alibi is not None:
            bias = self.hooks.get(m.alibi, call)[2]
            self.add(
                Stage(
                    f"{p}positions",
                    "Positional Encoding (ALiBi): -slope_h * distance, added to every layer's scores",
                    where(m.alibi),
                    positions,
                    bias,
                    ("B", "T"),
                    ("1", "heads", "T_q", "T_k"),
                    rows,
                    cols=rows,
                )
            )

    # -- the stacks ---------------------------------------------------------------------------------------------
    def stack(self, name: str, stack, call: int, q_side: str, k_side: str, N: int, S: int | None) -> None:
        """The stages of every layer of one stack. N: its tokens; S: the memory's (cross-attention) or None."""
        cfg = self.cfg
        flops = layer_flops(cfg, 1, N, S)
        act = layer_activation_bytes(cfg, 1, N)
        rows = self.labels[q_side]
        if stack.rel_bias is not None:
            bias = self.hooks.get(stack.rel_bias)[2]
            self.add(
                Stage(
                    f"{name}.positions",
                    "Positional Encoding (T5 relative): a learned bias per head and distance bucket, added to "
                    "every layer's self-attention scores",
                    where(stack.rel_bias),
                    torch.tensor([N]),
                    bias,
                    ("T",),
                    ("1", "heads", "T_q", "T_k"),
                    rows,
                    cols=rows,
                )
            )
        for li, layer in enumerate(stack.layers):
            pre = f"{name}.{li}"
            own_mask = name == "decoder" or self.arch == "encoder_only"  # an encoder_decoder's encoder: none
            masked = own_mask and self.model.mask_kind != "bidirectional"
            box = "Masked Multi-Head Attention" if masked else "Multi-Head Attention"
            self.attention(f"{pre}.self_attn", layer, "self_attn", box, rows, self.labels[k_side], flops, act)
            if layer.cross_attn is not None:
                box = "Multi-Head Attention (cross)"
                self.attention(f"{pre}.cross_attn", layer, "cross_attn", box, rows, self.labels["src"], flops, None)
            self.ffn(f"{pre}.ffn", layer, rows, flops, act)
        if stack.norm is not None:
            args, _, y = self.hooks.get(stack.norm)
            self.add(
                Stage(f"{name}.norm", "final Norm of the stack (pre-LN)", where(stack.norm), args[0], y, *_D, rows)
            )

    def norm_stage(self, name: str, layer, part: str, rows, act) -> None:
        """pre-LN: the norm before a sublayer."""
        norm = getattr(layer, part + "_sub").norm
        args, _, y = self.hooks.get(norm)
        b = act["norm"] // 2 if act else None
        self.add(
            Stage(
                f"{name}.norm",
                "Norm (pre-LN): what the sublayer reads",
                where(norm),
                args[0],
                y,
                *_D,
                rows,
                activation_bytes=b,
            )
        )

    def add_norm(self, name: str, layer, part: str, rows, act) -> None:
        """The residual stream after a sublayer: norm(x + sublayer(x)) (post-LN) or x + sublayer(norm(x))."""
        sub = getattr(layer, part + "_sub")
        if not sub.norm_first:
            args, _, y = self.hooks.get(sub.norm)
            title, inp = "Add & Norm: norm(x + sublayer(x))", args[0]
            b = act["norm"] // 2 if act else None
        else:  # the next sublayer's norm reads the sum; after the last sublayer it is the layer's output
            parts = [p for p in _PARTS if getattr(layer, p) is not None]
            nxt = parts[parts.index(part) + 1] if part != parts[-1] else None
            y = self.hooks.get(getattr(layer, nxt + "_sub").norm)[0][0] if nxt else self.hooks.get(layer)[2]
            inp, title, b = self.hooks.get(getattr(layer, part))[2], "Add: x + sublayer(norm(x)) (pre-LN)", None
        self.add(
            Stage(f"{name}.add_norm", title, where(sub) + ", " + where(sub.norm), inp, y, *_D, rows, activation_bytes=b)
        )

    def attention(self, name: str, layer, part: str, box: str, rows, cols, flops, act) -> None:
        mha: MultiHeadAttention = getattr(layer, part)
        rec = self.records[id(mha)]
        cross = part == "cross_attn"
        f = "cross" if cross else "attention"
        a = (lambda k: act[k]) if act else (lambda k: None)  # noqa: E731
        if getattr(layer, part + "_sub").norm_first:
            self.norm_stage(name, layer, part, rows, act)
        args, kwargs, y = self.hooks.get(mha)
        x = args[0]
        q, k, v = rec["q"], rec["k"], rec["v"]
        kv = "kv_heads" if k.shape[1] != q.shape[1] else "heads"
        T_k = "S" if cross else "T"
        proj = "q_proj, kv_proj" if cross else "qkv_proj"
        heads_flops = flops["cross_q"] + flops["cross_kv"] if cross else flops["attention_qkv"]
        rope = " (RoPE rotates Q and K)" if self.cfg.position == "rope" and not cross else ""
        qk = "Q from the decoder, K and V from the encoder output" if cross else "Q, K, V from x"
        self.add(
            Stage(
                f"{name}.heads",
                f"{box}: {qk}, split into heads{rope}",
                where(mha, proj),
                x,
                q,
                ("B", "T", "d_model"),
                ("B", "heads", "T", "d_k"),
                rows,
                parts={
                    "Q": (q, ("B", "heads", "T", "d_k")),
                    "K": (k, ("B", kv, T_k, "d_k")),
                    "V": (v, ("B", kv, T_k, "d_k")),
                },
                cols=cols,
                flops=heads_flops,
                activation_bytes=a("attention_qkv"),
                note=f"memory (the encoder output): {list(args[1].shape)} (B, S, d_model)" if cross else "",
            )
        )
        scale = "1/sqrt(d_k)" if mha.scale is None else f"{mha.scale:g}"
        parts = {"bias": (rec["bias"], ("1", "heads", "T_q", "T_k"))} if rec["bias"] is not None else {}
        self.add(
            Stage(
                f"{name}.scores",
                f"{box}: scores Q K^T x {scale}" + (" (+ position bias)" if parts else ""),
                "attend (zoo/model/blocks/scaled_dot_product.py)",
                q,
                rec["scores"],
                ("B", "heads", "T", "d_k"),
                ("B", "heads", "T_q", "T_k"),
                rows,
                parts=parts,
                cols=cols,
                flops=flops[f"{f}_scores"],
                activation_bytes=a("attention_scores"),
            )
        )
        T_q, T_k = rec["scores"].shape[-2:]
        mask = rec["mask"]
        mask01 = (
            torch.ones(T_q, T_k, dtype=torch.long)
            if mask is None
            else mask.expand(1, 1, T_q, T_k)[0, 0].long()
            if mask.dim() == 4
            else mask.long()
        )
        self.add(
            Stage(
                f"{name}.weights",
                f"{box}: mask, then softmax over the keys: each row sums to 1",
                "attend (zoo/model/blocks/scaled_dot_product.py)",
                rec["scores"],
                rec["weights"],
                ("B", "heads", "T_q", "T_k"),
                ("B", "heads", "T_q", "T_k"),
                rows,
                mask=mask01,
                cols=cols,
                weights=rec["weights"][0],
                activation_bytes=a("attention_softmax"),
            )
        )
        self.add(
            Stage(
                f"{name}.values",
                f"{box}: weights x V, per head",
                "attend (zoo/model/blocks/scaled_dot_product.py)",
                rec["weights"],
                rec["heads"],
                ("B", "heads", "T_q", "T_k"),
                ("B", "heads", "T", "d_k"),
                rows,
                flops=flops[f"{f}_values"],
                activation_bytes=a("attention_values"),
            )
        )
        concat = self.hooks.get(mha.out_proj)[0][0]
        self.add(
            Stage(
                f"{name}.combine",
                f"{box}: concatenate the heads, then W_O",
                where(mha, "out_proj"),
                rec["heads"],
                y,
                ("B", "heads", "T", "d_k"),
                ("B", "T", "d_model"),
                rows,
                parts={"concat": (concat, ("B", "T", "d_model"))},
                flops=flops[f"{f}_out"],
                activation_bytes=a("attention_out"),
            )
        )
        self.add_norm(name, layer, part, rows, act)

    def ffn(self, name: str, layer, rows, flops, act) -> None:
        if layer.ffn_sub.norm_first:
            self.norm_stage(name, layer, "ffn", rows, act)
        args, _, y = self.hooks.get(layer.ffn)
        hidden = self.hooks.get(layer.ffn.linear2)[0][0]
        act_name = self.cfg.activation
        d, d_ff = self.cfg.d_model, self.cfg.d_ff
        shape = (
            f"{d} -> {2 * d_ff} -> {act_name}(gate) x up -> {d_ff} -> {d}"
            if layer.ffn.gated
            else (f"{d} -> {d_ff} -> {act_name} -> {d}")
        )
        self.add(
            Stage(
                name,
                f"Feed Forward: {shape}",
                where(layer.ffn),
                args[0],
                y,
                *_D,
                rows,
                parts={"hidden": (hidden, ("B", "T", "d_ff"))},
                flops=flops["ffn"],
                activation_bytes=act["ffn"] if act else None,
            )
        )
        self.add_norm(name, layer, "ffn", rows, act)

    def head(self, logits: torch.Tensor, rows: list[str], top_k: int) -> None:
        head = self.model.lm_head
        args, _, out = self.hooks.get(head)
        flops = forward_flops_by_stack(self.model, 1, logits.shape[1], self._src_len())["head"]["logits"]
        V = logits.shape[-1]
        self.add(
            Stage(
                "logits",
                "Linear: a score per vocabulary token",
                where(head),
                args[0],
                out,
                ("B", "T", "d_model"),
                ("B", "T", "vocab"),
                rows,
                flops=flops,
            )
        )
        probs = logits.float().softmax(-1)
        p, i = probs[0].topk(min(top_k, V), dim=-1)  # (T, k)
        topk = [[(self.token(int(j)), float(pp)) for pp, j in zip(prow, irow)] for prow, irow in zip(p, i)]
        self.add(
            Stage(
                "probs",
                "Softmax: probabilities over the vocabulary; the top tokens per position",
                "torch.softmax (the trace's; the model returns logits)",
                logits,
                probs,
                ("B", "T", "vocab"),
                ("B", "T", "vocab"),
                rows,
                topk=topk,
            )
        )

    def _src_len(self) -> int | None:
        return self.labels_len("src") if self.arch == "encoder_decoder" else None

    def token(self, i: int) -> str:
        return self.vocab[i] if 0 <= i < len(self.vocab) else f"<{i}>"


_D = (("B", "T", "d_model"), ("B", "T", "d_model"))


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


def figure(tr: Trace, path: Path) -> tuple[Path, set[str]]:
    """One figure (PNG, or SVG when path ends in .svg): a row per attention (layer and kind), its mask and a
    heat map per head, labelled by tokens (rows = queries, columns = keys), drawn with fonts that have their
    characters (zoo.report.trace_font). Returns (path, the characters no font has, written as U+XXXX)."""
    import matplotlib

    from zoo.report.trace_font import families

    rows = [s for s in tr.stages if s.weights is not None]
    if not rows:
        raise ValueError("this trace has no attention stage to draw")
    fonts, missing = families(t for s in rows for t in (*s.rows, *s.cols))
    with matplotlib.rc_context({"font.family": fonts}):
        _draw(rows, path, missing)
    return path, missing


def _draw(rows: list[Stage], path: Path, missing: set[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from zoo.report.trace_font import label

    h = max(s.weights.shape[0] for s in rows)
    fig, axes = plt.subplots(len(rows), h + 1, figsize=(2.6 * (h + 1), 2.6 * len(rows)), squeeze=False)
    for r, s in enumerate(rows):
        ylab = [label(t, missing) for t in s.rows]
        xlab = [label(t, missing) for t in s.cols]
        panels = [("mask (1 = may attend)", s.mask.float(), "Blues")] + [
            (f"head {i}", s.weights[i].float(), "viridis") for i in range(s.weights.shape[0])
        ]
        for c, ax in enumerate(axes[r]):
            if c >= len(panels):
                ax.axis("off")
                continue
            title, m, cmap = panels[c]
            ax.imshow(m.numpy(), cmap=cmap, vmin=0.0, vmax=1.0)
            if m.numel() <= 64:  # small maps: each cell's value written in it
                for (i, j), val in zip(itertools.product(*map(range, m.shape)), m.flatten().tolist()):
                    text = f"{val:.0f}" if c == 0 else f"{val:.2f}"
                    dark = val > 0.5 if c == 0 else val < 0.6  # Blues: dark at 1; viridis: dark at 0
                    ax.text(j, i, text, ha="center", va="center", fontsize=6, color="w" if dark else "k")
            ax.set_xticks(range(len(xlab)), xlab, rotation=90, fontsize=7)
            ax.set_yticks(range(len(ylab)), ylab, fontsize=7)
            ax.set_title(f"{s.name.rsplit('.', 1)[0]}\n{title}" if c == 0 else title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
