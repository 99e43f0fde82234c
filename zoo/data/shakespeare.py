"""Char-level Tiny Shakespeare (the nanoGPT shakespeare_char setup): zoo.data.text_corpus.TextCorpus on the
one published file, split 90/10 into train/val by character position.

The text is tokenized once into a memory-mapped token file (zoo.data.token_file, uint16 ids) under
`token_dir`; every later run, DDP rank and DataLoader worker reads windows from that file, so resident
memory does not grow with the corpus.
"""

from zoo.data.text_corpus import TextCorpus
from zoo.data.windows import FixedWindows, RandomWindows, StreamSampler, _mix64

__all__ = ["TinyShakespeare", "RandomWindows", "FixedWindows", "StreamSampler", "_mix64"]


class TinyShakespeare(TextCorpus):
    """Tiny Shakespeare, character level: TextCorpus on one file (the first 90% of its characters train).

    Args: TextCorpus's block_size, batch_size, num_workers, pin_memory, val_windows, batches_per_epoch, seed,
    data_dir, mirror, token_dir, limit, and file: the resolver name of the text, or the path of your own UTF-8 text
    file (used as it is, never checksummed; see zoo.data.resolver.locate).
    """

    def __init__(
        self,
        block_size: int = 256,
        batch_size: int = 64,
        num_workers: int = 0,
        pin_memory: bool = False,
        val_windows: int = 500,
        batches_per_epoch: int = 250,
        seed: int = 1337,
        data_dir=None,
        mirror=None,
        file: str = "tiny_shakespeare/input.txt",
        token_dir=None,
        tokenizer: str = "char",
        special_tokens: dict | None = None,
        limit: int | None = None,
    ):
        super().__init__(
            file=file,
            tokenizer=tokenizer,
            special_tokens=special_tokens,
            block_size=block_size,
            batch_size=batch_size,
            num_workers=num_workers,
            pin_memory=pin_memory,
            val_windows=val_windows,
            batches_per_epoch=batches_per_epoch,
            seed=seed,
            data_dir=data_dir,
            mirror=mirror,
            token_dir=token_dir,
            limit=limit,
        )
