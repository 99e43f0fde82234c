"""The stages of one attention sublayer, from zoo.model.blocks.attention.record_trace's record of its forward: Q, K, V
split into heads, the scores, the mask and weights, the per-head values, the heads combined by W_O. A mixin of
zoo.trace.builder.Builder, whose hooks, records, labels and `add` it uses."""

from collections.abc import Callable
from typing import NamedTuple

import torch

from zoo.model.blocks.attention import MultiHeadAttention
from zoo.model.blocks.scaled_dot_product import attend
from zoo.trace.source import where
from zoo.trace.stages import Stage

HEAD_AXES = ("B", "heads", "T", "d_k")
SCORE_AXES = ("B", "heads", "T_q", "T_k")


class Sublayer(NamedTuple):
    """One attention sublayer being traced: its stage name prefix, module, record (q, k, v, scores, mask,
    weights, heads, bias), diagram box, row and column labels, FLOPs (zoo.model.cost.layer_flops), the key of
    those FLOPs ("attention" or "cross") and its activation bytes by part (None: not counted)."""

    name: str
    mha: MultiHeadAttention
    rec: dict
    box: str
    rows: list
    cols: list
    cross: bool
    flops: dict
    kind: str
    act: Callable[[str], int | None]


def mask01(mask: torch.Tensor | None, T_q: int, T_k: int) -> torch.Tensor:
    """The (T_q, T_k) 0/1 mask attention applied (1 = may attend) from its record: None (all), 4-D or 2-D."""
    if mask is None:
        return torch.ones(T_q, T_k, dtype=torch.long)
    return mask.expand(1, 1, T_q, T_k)[0, 0].long() if mask.dim() == 4 else mask.long()


class AttentionStages:
    def attention(self, name: str, layer, part: str, box: str, rows, cols, flops, act) -> None:
        """The stages of one attention sublayer (part: self_attn or cross_attn) and the residual after it."""
        mha: MultiHeadAttention = getattr(layer, part)
        cross = part == "cross_attn"
        a = (lambda k: act[k]) if act else (lambda k: None)  # noqa: E731
        kind = "cross" if cross else "attention"
        sub = Sublayer(name, mha, self.records[id(mha)], box, rows, cols, cross, flops, kind, a)
        if getattr(layer, part + "_sub").norm_first:
            self.norm_stage(name, layer, part, rows, act)
        self.heads_stage(sub)
        self.scores_stage(sub)
        self.weights_stage(sub)
        self.values_stage(sub)
        self.combine_stage(sub)
        self.add_norm(name, layer, part, rows, act)

    def heads_stage(self, s: Sublayer) -> None:
        args, _, _ = self.hooks.get(s.mha)
        q, k, v = s.rec["q"], s.rec["k"], s.rec["v"]
        kv = "kv_heads" if k.shape[1] != q.shape[1] else "heads"
        T_k = "S" if s.cross else "T"
        rope = " (RoPE rotates Q and K)" if self.cfg.position == "rope" and not s.cross else ""
        qk = "Q from the decoder, K and V from the encoder output" if s.cross else "Q, K, V from x"
        self.add(
            Stage(
                f"{s.name}.heads",
                f"{s.box}: {qk}, split into heads{rope}",
                where(s.mha, "q_proj, kv_proj" if s.cross else "qkv_proj"),
                args[0],
                q,
                ("B", "T", "d_model"),
                HEAD_AXES,
                s.rows,
                parts={"Q": (q, HEAD_AXES), "K": (k, ("B", kv, T_k, "d_k")), "V": (v, ("B", kv, T_k, "d_k"))},
                cols=s.cols,
                flops=s.flops["cross_q"] + s.flops["cross_kv"] if s.cross else s.flops["attention_qkv"],
                activation_bytes=s.act("attention_qkv"),
                note=f"memory (the encoder output): {list(args[1].shape)} (B, S, d_model)" if s.cross else "",
            )
        )

    def scores_stage(self, s: Sublayer) -> None:
        rec = s.rec
        scale = "1/sqrt(d_k)" if s.mha.scale is None else f"{s.mha.scale:g}"
        parts = {"bias": (rec["bias"], ("1", "heads", "T_q", "T_k"))} if rec["bias"] is not None else {}
        self.add(
            Stage(
                f"{s.name}.scores",
                f"{s.box}: scores Q K^T x {scale}" + (" (+ position bias)" if parts else ""),
                where(attend),
                rec["q"],
                rec["scores"],
                HEAD_AXES,
                SCORE_AXES,
                s.rows,
                parts=parts,
                cols=s.cols,
                flops=s.flops[f"{s.kind}_scores"],
                activation_bytes=s.act("attention_scores"),
            )
        )

    def weights_stage(self, s: Sublayer) -> None:
        rec = s.rec
        title = f"{s.box}: mask, then softmax over the keys: each row sums to 1"
        self.add(
            Stage(
                f"{s.name}.weights",
                title,
                where(attend),
                rec["scores"],
                rec["weights"],
                SCORE_AXES,
                SCORE_AXES,
                s.rows,
                mask=mask01(rec["mask"], *rec["scores"].shape[-2:]),
                cols=s.cols,
                weights=rec["weights"][0],
                activation_bytes=s.act("attention_softmax"),
            )
        )

    def values_stage(self, s: Sublayer) -> None:
        self.add(
            Stage(
                f"{s.name}.values",
                f"{s.box}: weights x V, per head",
                where(attend),
                s.rec["weights"],
                s.rec["heads"],
                SCORE_AXES,
                HEAD_AXES,
                s.rows,
                flops=s.flops[f"{s.kind}_values"],
                activation_bytes=s.act("attention_values"),
            )
        )

    def combine_stage(self, s: Sublayer) -> None:
        y = self.hooks.get(s.mha)[2]
        concat = self.hooks.get(s.mha.out_proj)[0][0]
        self.add(
            Stage(
                f"{s.name}.combine",
                f"{s.box}: concatenate the heads, then W_O",
                where(s.mha, "out_proj"),
                s.rec["heads"],
                y,
                HEAD_AXES,
                ("B", "T", "d_model"),
                s.rows,
                parts={"concat": (concat, ("B", "T", "d_model"))},
                flops=s.flops[f"{s.kind}_out"],
                activation_bytes=s.act("attention_out"),
            )
        )
