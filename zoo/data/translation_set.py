"""A translation split's token-id rows (TranslationSet) and their padded batches (collate_translation): what
zoo.data.parallel_text.ParallelText and zoo.data.multi30k.Multi30k batch."""

import torch
from torch.utils.data import Dataset

from zoo.data.batching import pad
from zoo.data.bpe import BOS_ID, EOS_ID, PAD_ID


class TranslationSet(Dataset):
    """Token-id rows of a split; item i is (i, src, tgt_in, tgt_out).

    src = encode(source) + [EOS]; tgt_in = [BOS] + encode(target); tgt_out = encode(target) + [EOS], with the
    tokenizer's bos_id / eos_id (zoo's fixed ones by default).
    `srcs` / `refs` hold the raw source / target lines (no newline), indexed like the examples.
    """

    def __init__(
        self,
        src: list[list[int]],
        tgt: list[list[int]],
        srcs: list[str],
        refs: list[str],
        bos_id: int = BOS_ID,
        eos_id: int = EOS_ID,
    ):
        self.src = [s + [eos_id] for s in src]
        self.tgt_in = [[bos_id] + t for t in tgt]
        self.tgt_out = [t + [eos_id] for t in tgt]
        self.srcs, self.refs = srcs, refs
        self.src_lens = [len(s) for s in self.src]
        self.tgt_lens = [len(t) for t in self.tgt_in]

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int):
        return i, self.src[i], self.tgt_in[i], self.tgt_out[i]


def collate_translation(items, pad_id: int = PAD_ID) -> dict[str, torch.Tensor]:
    """Pad (index, src, tgt_in, tgt_out) items with pad_id: "src" (B, S), "src_key_padding_mask" (B, S),
    "tgt_in" / "tgt_out" (B, T), "tgt_key_padding_mask" (B, T) (bool, True = padding), "index" (B,) long."""
    index, src, tgt_in, tgt_out = zip(*items)
    src, src_mask = pad(src, pad_id)
    tgt_in, tgt_mask = pad(tgt_in, pad_id)
    tgt_out, _ = pad(tgt_out, pad_id)
    return {
        "src": src,
        "src_key_padding_mask": src_mask,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_key_padding_mask": tgt_mask,
        "index": torch.tensor(index, dtype=torch.long),
    }
