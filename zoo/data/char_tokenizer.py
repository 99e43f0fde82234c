"""Character-level tokenizer: one token per distinct character, ids in sorted character order."""


class CharTokenizer:
    """Maps characters to ids and back.

    Args:
        chars: the vocabulary, one character per id (id i is chars[i]); no duplicates.
    """

    def __init__(self, chars):
        self.chars = list(chars)
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        if len(self.stoi) != len(self.chars) or any(len(c) != 1 for c in self.chars):
            raise ValueError("chars must be distinct single characters")

    @classmethod
    def from_text(cls, text: str) -> "CharTokenizer":
        """Build the vocabulary as the sorted set of characters in text."""
        return cls(sorted(set(text)))

    @classmethod
    def from_state_dict(cls, state: dict) -> "CharTokenizer":
        """Rebuild a tokenizer from state_dict() output (e.g. stored in checkpoint hyperparameters)."""
        return cls(state["chars"])

    def state_dict(self) -> dict:
        """Return {"chars": str}: a plain, YAML/pickle-friendly description of the vocabulary."""
        return {"chars": "".join(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> list[int]:
        """Map a string to token ids.

        Raises:
            ValueError: if s contains a character outside the vocabulary.
        """
        try:
            return [self.stoi[c] for c in s]
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the tokenizer's vocabulary") from None

    def decode(self, ids) -> str:
        """Map token ids (ints, list or 1-D tensor) back to a string."""
        return "".join(self.chars[int(i)] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
