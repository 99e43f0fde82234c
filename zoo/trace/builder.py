"""Turns the hooks' calls and the attention records of one forward into Stages: the embeddings and positions,
the stacks (zoo.trace.layers, zoo.trace.attention), the head and its probabilities."""

import torch

from zoo.model.cost import forward_flops_by_stack
from zoo.trace.attention import AttentionStages
from zoo.trace.layers import LayerStages
from zoo.trace.source import where
from zoo.trace.stages import Stage

SINUSOID = "sinusoid PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...)"
TOKEN_AXES = (("B", "T"), ("B", "T", "d_model"))  # a stage from token ids to vectors


class Builder(LayerStages, AttentionStages):
    """The Stages of one traced forward of `model` (arch) from its hooks (zoo.trace.hooks.Hooks) and attention
    records ({id(MultiHeadAttention): its trace_record}); labels: each input's token labels; vocab: the label
    of each output id."""

    def __init__(self, model, arch, hooks, records: dict, labels: dict, vocab: list[str]):
        self.model, self.arch, self.hooks, self.records = model, arch, hooks, records
        self.labels, self.vocab = labels, vocab
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
        title = f"{box}: each token id -> its row of the embedding table"
        self.add(Stage(f"{p}embedding", title, where(emb.tok) + " in " + where(emb), idx, tok, *TOKEN_AXES, rows))
        self.positions(p, emb, i, call, positions, rows)
        scale = f" x sqrt(d_model) = x {emb.scale:.3g}" if emb.scale != 1.0 else ""
        extras = (" + token type 0" if emb.types is not None else "") + (" -> norm" if emb.norm is not None else "")
        added = " + positional encoding" if emb.pos is not None else ""
        title = f"{box}{scale}{added}{extras}: what the first layer reads"
        self.add(Stage(f"{p}input", title, where(emb), idx, x, *TOKEN_AXES, rows))

    def positions(self, p: str, emb, i: int, call: int, positions: torch.Tensor, rows: list[str]) -> None:
        """The positions stage of one input: an added table (sinusoid, learned), RoPE's angles or ALiBi's bias."""
        m, name = self.model, f"{p}positions"
        if emb.pos is not None:
            pe = self.hooks.get(emb.pos, i)[2]
            kind = "a learned row per position" if self.cfg.position == "learned" else SINUSOID
            self.add(Stage(name, f"Positional Encoding: {kind}", where(emb.pos), positions, pe, *TOKEN_AXES, rows))
        elif m.rope is not None:
            cos, sin = self.hooks.get(m.rope, call)[2]
            axes = ("B", "1", "T", "d_k/2")
            title = "Positional Encoding (RoPE): angles pos * theta_i that rotate each pair of q and k in attention"
            parts = {"cos": (cos, axes), "sin": (sin, axes)}
            self.add(Stage(name, title, where(m.rope), positions, cos, ("B", "T"), axes, rows, parts=parts))
        elif m.alibi is not None:
            bias = self.hooks.get(m.alibi, call)[2]
            title = "Positional Encoding (ALiBi): -slope_h * distance, added to every layer's scores"
            axes = ("1", "heads", "T_q", "T_k")
            self.add(Stage(name, title, where(m.alibi), positions, bias, ("B", "T"), axes, rows, cols=rows))

    # -- the head -----------------------------------------------------------------------------------------------
    def head(self, logits: torch.Tensor, rows: list[str], top_k: int) -> None:
        """The LM head's logits and the trace's softmax over them, with the top tokens per position."""
        head = self.model.lm_head
        args, _, out = self.hooks.get(head)
        src_len = self.labels_len("src") if self.arch == "encoder_decoder" else None
        flops = forward_flops_by_stack(self.model, 1, logits.shape[1], src_len)["head"]["logits"]
        V = logits.shape[-1]
        vocab_axes = ("B", "T", "vocab")
        title = "Linear: a score per vocabulary token"
        self.add(
            Stage("logits", title, where(head), args[0], out, ("B", "T", "d_model"), vocab_axes, rows, flops=flops)
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
                vocab_axes,
                vocab_axes,
                rows,
                topk=topk,
            )
        )

    def token(self, i: int) -> str:
        return self.vocab[i] if 0 <= i < len(self.vocab) else f"<{i}>"
