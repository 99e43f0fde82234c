"""The special tokens' names in pretrained files (ROLE_NAMES) and SpecialIds, the ids of a tokenizer's roles as the
model and the batches take them: the base of zoo.data.bpe.SubwordTokenizer."""

from collections.abc import Iterable

from tokenizers import Tokenizer

from zoo.errors import DataError

MODEL_KEYS = {"pad_id": "pad", "bos_id": "bos", "eos_id": "eos"}  # ModelConfig key -> role
# the names a role goes by in pretrained files (zoo's, BERT's, RoBERTa's, GPT-2's), first match wins
ROLE_NAMES = {
    "pad": ("<pad>", "[PAD]"),
    "bos": ("<s>", "<bos>", "[CLS]", "<|endoftext|>"),
    "eos": ("</s>", "<eos>", "[SEP]", "<|endoftext|>"),
    "unk": ("<unk>", "[UNK]"),
    "mask": ("<mask>", "[MASK]"),
    "cls": ("<cls>", "[CLS]", "<s>"),
}
PURPOSE = {
    "pad": "pad the batches",
    "bos": "start every target",
    "eos": "end every sequence",
    "cls": "start every example (the classifier may pool its state)",
    "unk": "stand for unknown text",
    "mask": "mask tokens",
}


def special_tokens_of(tok: Tokenizer) -> dict[str, int]:
    """{token: id} of the tokenizer's special added tokens."""
    return {t.content: i for i, t in sorted(tok.get_added_tokens_decoder().items()) if t.special}


class SpecialIds:
    """The ids of a tokenizer's special roles: subclasses set `special_ids` ({role: id}), `tokenizer` (a
    tokenizers.Tokenizer) and `where` (the tokenizer, for messages)."""

    special_ids: dict[str, int]
    tokenizer: Tokenizer
    where: str

    def id_of(self, role: str, needed_for: str = "") -> int:
        """The id of `role`. Raises DataError naming the role, the file and the fix when the tokenizer has none."""
        if role not in self.special_ids:
            specials = ", ".join(special_tokens_of(self.tokenizer)) or "(it has none)"
            raise DataError(
                f"{self.where} has no {role} token (looked for {', '.join(ROLE_NAMES[role])} among its "
                f"special tokens: {specials}){needed_for}.\nFix: set data.special_tokens.{role} to a "
                f"token of the file (a special token above, or any token of its vocabulary), or use "
                f"data.tokenizer=bpe"
            )
        return self.special_ids[role]

    @property
    def pad_id(self) -> int:
        return self.id_of("pad")

    @property
    def bos_id(self) -> int:
        return self.id_of("bos")

    @property
    def eos_id(self) -> int:
        return self.id_of("eos")

    def model_ids(
        self, needed: Iterable[str] = (), distinct: Iterable[str] = (), user: str = "the data"
    ) -> dict[str, int]:
        """The model keys {pad_id, bos_id, eos_id}, which ModelConfig needs distinct. Each `needed` role (those
        the data's batches hold) must be there, and the `distinct` ones (those the task reads from the model
        config: translation's pad, bos, eos) must have distinct ids. Each key takes its role's id (needed roles
        first, then eos, pad, bos) unless another key has it already or the role is missing: then the smallest
        id no other key has (a placeholder: only the distinct roles' ids are read from the model config).
        zoo's own tokenizers give MODEL_IDS.
        Raises DataError naming the role, the file and the fix (data.special_tokens.<role>)."""
        needed, distinct = tuple(needed), tuple(distinct)
        for role in dict.fromkeys(needed + distinct):
            self.id_of(role, f"; {user} needs one to {PURPOSE[role]}")
        owner: dict[int, str] = {}  # id -> role
        for role in distinct:
            i = self.special_ids[role]
            if i in owner:
                raise DataError(
                    f"{self.where} gives {owner[i]} and {role} the same token "
                    f"{self.tokenizer.id_to_token(i)!r} (id {i}), but {user} needs distinct pad, bos and "
                    f"eos ids.\nFix: set data.special_tokens.{role} to another token of the file"
                )
            owner[i] = role
        out = {}
        first = needed + distinct
        order = sorted(("eos_id", "pad_id", "bos_id"), key=lambda k: MODEL_KEYS[k] not in first)  # stable
        for key in order:  # the roles' own ids where free: needed roles first, then eos (generation stops there)
            i = self.special_ids.get(MODEL_KEYS[key])
            if i is not None and i not in out.values():
                out[key] = i
        for key in MODEL_KEYS:  # placeholders for the rest
            if key not in out:
                out[key] = next(j for j in range(len(MODEL_KEYS)) if j not in out.values())
        return {k: out[k] for k in MODEL_KEYS}
