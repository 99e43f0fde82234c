"""The trace's one forward: forward hooks on the model's own modules and, for what happens inside attention (q, k,
v per head, the scores, the mask, the weights), zoo.model.blocks.attention.record_trace.

No stage is computed here a second time, except the Softmax over the logits (the model returns logits; the
probabilities are softmax(logits)). The hooks only read: the logits are the same, bit for bit, as without the
trace.
"""

import torch
from torch import nn

from zoo.model.blocks.attention import record_trace
from zoo.model.decoder_only import DecoderOnly
from zoo.model.encoder_decoder import EncoderDecoder
from zoo.model.encoder_only import EncoderOnly
from zoo.trace.builder import Builder
from zoo.trace.stages import PARTS, Trace

ARCH_OF = {EncoderOnly: "encoder_only", DecoderOnly: "decoder_only", EncoderDecoder: "encoder_decoder"}


class Hooks:
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


def watch_model(model) -> Hooks:
    """Hooks on every module of a zoo model a stage reads: embeddings, positions, norms, sublayers, the head."""
    hooks = Hooks()
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
            for part in PARTS:
                if getattr(layer, part) is not None:
                    hooks.watch(getattr(layer, part), getattr(layer, part + "_sub").norm)
                    if part != "ffn":
                        hooks.watch(getattr(layer, part).out_proj)
    return hooks


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
    hooks = watch_model(model)
    try:
        with record_trace(model) as mods:
            logits = _call_model(model, arch, inputs)
            records = {id(m): dict(m.trace_record) for m in mods}
    finally:
        hooks.remove()
    builder = Builder(model, arch, hooks, records, labels, vocab)
    return Trace(arch, builder.stages(logits, top_k), logits, labels, vocab)
