"""translation on decoder_only: each pair as one sequence, source + EOS + target + EOS, the loss on the target
tokens only; model.mask causal, or prefix (bidirectional over source + separator): the "LM vs prefix LM"
comparison of T5 (Raffel et al. 2020, sec. 3.2.1). Also the joined sequence encoder_ar reads."""

import torch

from zoo.model.cost import batch_flops
from zoo.model.decoding.beam_search import beam_search_decoder_only
from zoo.model.decoding.generate import left_pad
from zoo.tasks.objectives.base import IGNORE, TranslationObjective


def join_source_target(src, src_key_padding_mask, tgt_out, tgt_key_padding_mask, pad_id: int):
    """One decoder-only sequence per pair: the source's real tokens (ending with EOS, the separator), then
    the target's real tokens (ending with EOS). src (B, S), tgt_out (B, T) right-padded, masks True = padding.
    Returns (seq (B, L) right-padded, key_padding_mask (B, L), src_len (B,) long, seq_len (B,) long)."""
    src_len = (~src_key_padding_mask).sum(1)  # (B,)
    tgt_len = (~tgt_key_padding_mask).sum(1)
    seq_len = src_len + tgt_len
    L = int(seq_len.max())
    seq = torch.full((src.shape[0], L), pad_id, dtype=torch.long, device=src.device)
    pos = torch.arange(L, device=src.device).unsqueeze(0)  # (1, L)
    is_src = pos < src_len.unsqueeze(1)
    is_tgt = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
    seq[is_src] = src[~src_key_padding_mask]
    seq[is_tgt] = tgt_out[~tgt_key_padding_mask]
    return seq, ~(is_src | is_tgt), src_len, seq_len


def joined(batch, pad_id: int):
    """join_source_target of a translation batch."""
    return join_source_target(
        batch["src"], batch["src_key_padding_mask"], batch["tgt_out"], batch["tgt_key_padding_mask"], pad_id
    )


class JoinedTranslation(TranslationObjective):
    """decoder_only translation on the joined sequence (the module docstring); greedy decoding with the KV
    cache from the left-padded source, or beam search."""

    NAME = "translation"
    ARCH = "decoder_only"
    MASKS = (None, "causal", "prefix", "sliding")  # prefix: bidirectional over the source only
    SOURCE = "joined"

    @classmethod
    def check_model(cls, model: dict, window: int | None = None, arch: str | None = None) -> None:
        """model.prefix_len is refused: with model.mask=prefix each pair's source (its length, row by row) is
        the prefix."""
        super().check_model(model, window, arch)
        if model.get("prefix_len"):
            raise ValueError(
                f"model.prefix_len={model['prefix_len']} is not read in translation: with model.mask=prefix the "
                f"prefix is each pair's source (its own length, row by row); drop model.prefix_len (0)"
            )

    def loss(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        seq, key_padding_mask, src_len, seq_len = joined(batch, self.model.cfg.pad_id)
        hidden, _ = self.model.features(
            seq[:, :-1], key_padding_mask=key_padding_mask[:, :-1], prefix_len=src_len
        )  # (B, L-1, d)
        pos = torch.arange(1, seq.shape[1], device=seq.device).unsqueeze(0)  # position of each target token
        on_target = (pos >= src_len.unsqueeze(1)) & (pos < seq_len.unsqueeze(1))
        target = seq[:, 1:].masked_fill(~on_target, IGNORE)
        return self.head_loss(hidden, target, ignore_index=IGNORE, label_smoothing=self.hparams.label_smoothing)

    def batch_flops(self, batch) -> float:
        """The joined sequence (B, S + T - 1) at its padded shape (zoo.model.cost.batch_flops)."""
        (B, S), T = batch["src"].shape, batch["tgt_out"].shape[1]
        return batch_flops(self.model, B, S + T - 1)

    @torch.no_grad()
    def translate(self, batch, beam_size: int = 1) -> list:
        """The left-padded sources are the prompt (prefix_len: the whole padded prompt); at most its length +
        task.max_len_b new tokens within model.max_len; greedy or beam search (GNMT length penalty)."""
        src, src_key_padding_mask, cfg = batch["src"], batch["src_key_padding_mask"], self.model.cfg
        rows = [r[~m].tolist() for r, m in zip(src, src_key_padding_mask)]
        idx, key_padding_mask = left_pad(rows, cfg.pad_id, device=src.device)
        max_new = min(idx.shape[1] + self.hparams.max_len_b, cfg.max_len - idx.shape[1])
        prefix = torch.full((idx.shape[0],), idx.shape[1], device=src.device)  # the whole (padded) prompt
        if beam_size > 1:
            out = beam_search_decoder_only(
                self.model,
                idx,
                key_padding_mask,
                beam_size,
                max_new,
                self.hparams.length_penalty,
                cfg.eos_id,
                prefix_len=prefix,
                early_stopping=self.hparams.early_stopping,
            )
        else:
            out = self.model.generate(
                idx, max_new, key_padding_mask=key_padding_mask, temperature=0.0, eos_id=cfg.eos_id, prefix_len=prefix
            )
        return self.trim(out[:, idx.shape[1] :])
