"""Hugging Face tokenizer files: a zoo tokenizer written as tokenizer.json + tokenizer_config.json (write_tokenizer),
an HF checkpoint's tokenizer read as a zoo tokenizer state with its special-token roles (hf_tokenizer_state)."""

import json
import logging
from pathlib import Path

from zoo.data.bpe import ROLES
from zoo.interop import args
from zoo.model import ModelConfig

log = logging.getLogger(__name__)

# the special-token roles of an HF tokenizer_config.json (SpecialTokensMixin.SPECIAL_TOKENS_ATTRIBUTES), kept as
# they are from a converted checkpoint's tokenizer
HF_ROLES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
    "additional_special_tokens",
    "extra_special_tokens",
)
# zoo's roles (zoo.data.bpe.ROLES) -> HF's role names ("pad" -> "pad_token")
_ZOO_ROLES = {role: f"{role}_token" for role in ROLES}


def tokenizer_state(tokenizer) -> dict | None:
    """The state dict ({"json", "special_tokens"?, "hf_roles"?}) of the tokenizer written as tokenizer.json (for
    {"src", "tgt"} states the source one), or None for a tokenizer without that form (zoo's character one)."""
    if isinstance(tokenizer, dict):
        if "json" in tokenizer:
            return tokenizer
        return tokenizer_state(tokenizer["src"]) if "src" in tokenizer else None
    if hasattr(tokenizer, "state_dict"):
        return tokenizer_state(tokenizer.state_dict())
    if hasattr(tokenizer, "to_str"):
        return {"json": tokenizer.to_str()}
    return None


def roles_of(tokenizer) -> dict[str, int] | None:
    """{zoo role: id} of a tokenizer with a tokenizer.json form (zoo.data.bpe.special_roles, with the state's
    data.special_tokens overrides), or None (no tokenizer, or a character tokenizer)."""
    state = tokenizer_state(tokenizer) if tokenizer is not None else None
    if state is None:
        return None
    from tokenizers import Tokenizer

    from zoo.data.bpe import special_roles

    return special_roles(Tokenizer.from_str(state["json"]), state.get("special_tokens"))


def _tokenizer_json(tokenizer) -> str | None:
    if isinstance(tokenizer, dict):
        if "json" in tokenizer:
            return tokenizer["json"]
        if "src" in tokenizer and "tgt" in tokenizer:
            src, tgt = _tokenizer_json(tokenizer["src"]), _tokenizer_json(tokenizer["tgt"])
            if src != tgt:
                log.warning(
                    "source and target tokenizers differ: tokenizer.json is the source one, "
                    "target_tokenizer/tokenizer.json the target one"
                )
            return src
        return None  # a character tokenizer ({"chars"}) has no tokenizer.json
    if hasattr(tokenizer, "state_dict"):
        return _tokenizer_json(tokenizer.state_dict())
    if hasattr(tokenizer, "to_str"):
        return tokenizer.to_str()
    return None


def write_tokenizer(tokenizer, out: Path, cfg: ModelConfig, special_ids: dict | None = None) -> bool:
    """tokenizer.json + tokenizer_config.json (PreTrainedTokenizerFast) in out; False (and a warning) for a
    tokenizer with no tokenizer.json form (zoo's character tokenizer). The roles tokenizer_config.json names: a
    converted checkpoint's own, as its tokenizer_config.json had them (the state's "hf_roles",
    hf_tokenizer_state); else the tokens of special_ids ({pad, bos, eos}_token_id, None = no such role; default
    cfg's pad / bos / eos ids) and the tokenizer's unk / mask / cls tokens (zoo.data.bpe.special_roles)."""
    if not args.path("write_tokenizer", "out", out).is_dir():
        raise ValueError(f"write_tokenizer: out={str(out)!r} is not a directory; to_hf creates it first")
    text = _tokenizer_json(tokenizer)
    if text is None:
        log.warning("this tokenizer has no tokenizer.json form (character tokenizer?); wrote no tokenizer")
        return False
    (out / "tokenizer.json").write_text(text)
    if isinstance(tokenizer, dict) and "src" in tokenizer and _tokenizer_json(tokenizer["tgt"]) != text:
        (out / "target_tokenizer").mkdir(exist_ok=True)
        (out / "target_tokenizer" / "tokenizer.json").write_text(_tokenizer_json(tokenizer["tgt"]))
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(text)
    state = tokenizer_state(tokenizer)
    if state.get("hf_roles") is not None:
        special = dict(state["hf_roles"])
    else:
        ids = special_ids or {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}
        named = {_ZOO_ROLES[r]: i for r, i in roles_of(tokenizer).items() if r in ("unk", "mask", "cls")}
        named.update({k[: -len("_id")]: i for k, i in ids.items()})
        special = {k: tok.id_to_token(i) for k, i in named.items() if i is not None and tok.id_to_token(i) is not None}
    (out / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": cfg.max_len, **special}, indent=2)
    )
    return True


def _plain_role(value):
    """A tokenizer_config.json role as plain text: an AddedToken dict becomes its content (its flags live in
    tokenizer.json's added_tokens)."""
    if isinstance(value, dict):
        return value.get("content", value)
    if isinstance(value, list):
        return [_plain_role(v) for v in value]
    return value


def hf_tokenizer_state(path: str | Path) -> dict | None:
    """{"json": tokenizer.json text, "hf_roles": {role: token}} of an HF checkpoint directory: the special-token
    roles (HF_ROLES) its tokenizer_config.json and special_tokens_map.json name, as they name them (write_tokenizer
    writes them back); no "hf_roles" when it has neither file. None when it has no tokenizer.json (e.g.
    Marian's SentencePiece files)."""
    if not args.path("hf_tokenizer_state", "path", path).is_dir():
        raise ValueError(f"hf_tokenizer_state: path={str(path)!r} is not a directory; give an HF checkpoint directory")
    d = Path(path)
    if not (d / "tokenizer.json").is_file():
        return None
    state = {"json": (d / "tokenizer.json").read_text()}
    files = [d / name for name in ("tokenizer_config.json", "special_tokens_map.json") if (d / name).is_file()]
    if files:
        roles = {}
        for f in files:
            roles.update({k: _plain_role(v) for k, v in json.loads(f.read_text()).items() if k in HF_ROLES})
        state["hf_roles"] = {k: v for k, v in roles.items() if v is not None}
    return state
