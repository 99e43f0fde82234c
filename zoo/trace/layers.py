"""The stages of a stack's layers: the norms and residual sums around each sublayer, the feed-forward network,
a stack's relative position bias and final norm (attention itself: zoo.trace.attention). A mixin of
zoo.trace.builder.Builder, whose hooks, labels and `add` it uses."""

import torch

from zoo.model.cost import layer_activation_bytes, layer_flops
from zoo.trace.source import where
from zoo.trace.stages import PARTS, RESIDUAL_AXES, Stage


class LayerStages:
    def stack(self, name: str, stack, call: int, q_side: str, k_side: str, N: int, S: int | None) -> None:
        """The stages of every layer of one stack. N: its tokens; S: the memory's (cross-attention) or None."""
        cfg = self.cfg
        flops = layer_flops(cfg, 1, N, S)
        act = layer_activation_bytes(cfg, 1, N)
        rows = self.labels[q_side]
        if stack.rel_bias is not None:
            self.relative_bias(name, stack, N, rows)
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
            title = "final Norm of the stack (pre-LN)"
            self.add(Stage(f"{name}.norm", title, where(stack.norm), args[0], y, *RESIDUAL_AXES, rows))

    def relative_bias(self, name: str, stack, N: int, rows: list[str]) -> None:
        """T5's relative position bias of a stack (computed once, added to every layer's self-attention)."""
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

    def norm_stage(self, name: str, layer, part: str, rows, act) -> None:
        """pre-LN: the norm before a sublayer."""
        norm = getattr(layer, part + "_sub").norm
        args, _, y = self.hooks.get(norm)
        b = act["norm"] // 2 if act else None
        title = "Norm (pre-LN): what the sublayer reads"
        self.add(Stage(f"{name}.norm", title, where(norm), args[0], y, *RESIDUAL_AXES, rows, activation_bytes=b))

    def add_norm(self, name: str, layer, part: str, rows, act) -> None:
        """The residual stream after a sublayer: norm(x + sublayer(x)) (post-LN) or x + sublayer(norm(x))."""
        sub = getattr(layer, part + "_sub")
        if not sub.norm_first:
            args, _, y = self.hooks.get(sub.norm)
            title, inp = "Add & Norm: norm(x + sublayer(x))", args[0]
            b = act["norm"] // 2 if act else None
        else:  # the next sublayer's norm reads the sum; after the last sublayer it is the layer's output
            parts = [p for p in PARTS if getattr(layer, p) is not None]
            nxt = parts[parts.index(part) + 1] if part != parts[-1] else None
            y = self.hooks.get(getattr(layer, nxt + "_sub").norm)[0][0] if nxt else self.hooks.get(layer)[2]
            inp, title, b = self.hooks.get(getattr(layer, part))[2], "Add: x + sublayer(norm(x)) (pre-LN)", None
        module = where(sub) + ", " + where(sub.norm)
        self.add(Stage(f"{name}.add_norm", title, module, inp, y, *RESIDUAL_AXES, rows, activation_bytes=b))

    def ffn(self, name: str, layer, rows, flops, act) -> None:
        """The feed-forward network (its hidden layer as a part), after its pre-LN norm, before its Add & Norm."""
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
                *RESIDUAL_AXES,
                rows,
                parts={"hidden": (hidden, ("B", "T", "d_ff"))},
                flops=flops["ffn"],
                activation_bytes=act["ffn"] if act else None,
            )
        )
        self.add_norm(name, layer, "ffn", rows, act)
