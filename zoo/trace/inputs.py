"""The inputs of `python -m zoo.trace`: the walk-through's toy model and sentence, or a trained checkpoint and its
own tokenizer, made into the model's inputs and their token labels.

By default the textbook walk-through: the source "I love you" (ids 2 5 3) and the shifted target "<s> 我 爱"
(ids 1 7 4) in a toy vocabulary of 10 tokens, on a freshly initialised model (the config's seed) with d_model 4,
2 heads (d_k 2), d_ff 16, one encoder and one decoder layer, no dropout. Every model option is a Hydra override
of zoo's own config (`model.norm_first=true model.position=rope ...`), composed as `python -m zoo` composes it.
decoder_only reads source, <s> and target as one sequence (with model.mask=prefix, bidirectional over the source
and <s>, as zoo's joined translation objective); encoder_only reads the source alone.
`ckpt_path=<run dir or .ckpt>` traces a trained model on its own tokenizer instead.
"""

import tempfile

import torch

from zoo.data.bpe import tokenizer_from_state
from zoo.errors import ConfigError, is_whole
from zoo.model import ModelConfig, build_model
from zoo.model.checkpoint_file import read_checkpoint_file, run_checkpoint
from zoo.trace.window import check_lengths, trained_lengths

# the walk-through's vocabulary: one table for both sides, so decoder_only and encoder_only read the same ids
TOY_VOCAB = ["<pad>", "<s>", "I", "you", "爱", "love", "he", "我", "你", "</s>"]
TOY_SPECIAL = {"pad_id": 0, "bos_id": 1, "eos_id": 9}
TOY_SRC, TOY_TGT = "I love you", "我 爱"
# the walk-through's sizes, before the user's overrides (which win)
TOY_MODEL = [
    "model.d_model=4",
    "model.n_heads=2",
    "model.d_ff=16",
    "model.n_layers=1",
    "model.dropout=0.0",
    "model.max_len=16",
]
FROM_TOY = ("vocab_size", "src_vocab_size", "pad_id", "bos_id", "eos_id")  # the toy vocabulary sets these


class TraceError(ValueError):
    """Bad input to zoo.trace; main prints it and exits with 2."""


def split_overrides(items: list[str]) -> tuple[str | None, list[str]]:
    """(ckpt_path or None, the Hydra overrides). Raises TraceError for an item that is not KEY=VALUE."""
    ckpt, rest = None, []
    for item in items:
        if "=" not in item:
            raise TraceError(
                f"{item!r} is not an override: write KEY=VALUE (+arch=encoder_decoder, "
                f"model.norm_first=true, ckpt_path=RUN_DIR) or an option (--src, --tgt, ...)"
            )
        key, _, value = item.partition("=")
        if key == "ckpt_path":
            ckpt = value
        else:
            rest.append(item)
    return ckpt, rest


# -- the toy model ---------------------------------------------------------------------------------------------
def toy_model(overrides: list[str]):
    """(arch, model in eval mode, ModelConfig) of the walk-through, with the user's overrides composed into zoo's
    config as `python -m zoo` composes them (zoo.run.job.compose_job); seeded with the config's seed.
    Raises ConfigError for a key the toy vocabulary sets, a bad override or a bad model option."""
    from zoo.run.job import compose_job
    from zoo.run.model_config import model_dict

    for item in overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        if key.startswith("model.") and key[len("model.") :] in FROM_TOY:
            raise ConfigError(
                f"{item}: the toy vocabulary of {len(TOY_VOCAB)} tokens sets model.{key[6:]}; drop it, or trace a "
                f"trained model on its own vocabulary with ckpt_path=<run dir>"
            )
    if not any(o.split("=", 1)[0].lstrip("+") == "arch" for o in overrides):
        overrides = ["+arch=encoder_decoder", *overrides]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            cfg = compose_job([*TOY_MODEL, *overrides], tmp)
        except Exception as e:  # noqa: BLE001 -- Hydra's own errors; cli_overrides names a typo's nearest key
            from zoo.run.cli_overrides import check_overrides
            from zoo.run.conf import CONF_DIR

            check_overrides([*TOY_MODEL, *overrides], CONF_DIR)
            raise ConfigError(f"the overrides do not compose: {str(e).splitlines()[0]}") from None
    if not is_whole(cfg.seed) or cfg.seed < 0:
        raise ConfigError(f"seed={cfg.seed!r} must be a non-negative integer, e.g. seed=1")
    fields = {**model_dict(cfg), "vocab_size": len(TOY_VOCAB), "src_vocab_size": None, **TOY_SPECIAL}
    try:
        model_cfg = ModelConfig(**fields)
        torch.manual_seed(int(cfg.seed))
        model = build_model(cfg.arch, model_cfg)
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    return cfg.arch, model.eval(), model_cfg


def toy_ids(text: str, flag: str) -> list[int]:
    """The toy vocabulary's ids of space-separated tokens. Raises TraceError naming a token outside it."""
    ids = []
    for tok in text.split():
        if tok not in TOY_VOCAB:
            raise TraceError(
                f"{flag}: token {tok!r} is not in the toy vocabulary ({' '.join(TOY_VOCAB)}); write the sentence "
                f"with those tokens, space-separated, or trace a trained model on its own tokenizer with "
                f"ckpt_path=<run dir>"
            )
        ids.append(TOY_VOCAB.index(tok))
    return ids


# -- a checkpoint ------------------------------------------------------------------------------------------------
def token_label(tok, i: int) -> str:
    """The text of token id i in a CharTokenizer or SubwordTokenizer."""
    if hasattr(tok, "chars"):
        c = tok.chars[i]
        return {"\n": "\\n", " ": "␣", "\t": "\\t"}.get(c, c)
    return tok.tokenizer.id_to_token(i) or f"<{i}>"


def checkpoint_model(path: str):
    """(arch, model in eval mode, ModelConfig, src tokenizer, tgt tokenizer, the lengths it was trained on
    (zoo.trace.window.trained_lengths)) of a zoo checkpoint or run directory
    (zoo.model.checkpoint_file.run_checkpoint). Raises TraceError saying what the path is not."""
    fix = "pass a run's directory or one of its checkpoints/*.ckpt"
    ckpt_file, _ = run_checkpoint(path, TraceError)
    ckpt = read_checkpoint_file(ckpt_file, fix, TraceError)
    hp = ckpt.get("hyper_parameters") or {}
    tok = hp.get("tokenizer") or {}
    if "model" not in hp or "arch" not in hp or "state_dict" not in ckpt or not tok:
        raise TraceError(
            f"{ckpt_file} is not a zoo run's checkpoint (no model settings, arch, weights or tokenizer in it); {fix}"
        )
    try:
        src_tok = tokenizer_from_state(tok["src"] if "src" in tok else tok)
        tgt_tok = tokenizer_from_state(tok["tgt"]) if "tgt" in tok else src_tok  # one tokenizer: a single text
        model_cfg = ModelConfig(**hp["model"])
        model = build_model(hp["arch"], model_cfg)
    except (TypeError, ValueError) as e:
        raise TraceError(f"{ckpt_file}: its model or tokenizer cannot be rebuilt ({e}); {fix}") from None
    model.load_state_dict({k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")})
    trained = trained_lengths(hp, ckpt.get("datamodule_hyper_parameters") or {})
    return hp["arch"], model.eval(), model_cfg, src_tok, tgt_tok, trained


def encode(tok, text: str, flag: str) -> list[int]:
    try:
        return tok.encode(text)
    except ValueError as e:
        raise TraceError(f"{flag}: {e}; write it with the tokens of the checkpoint's tokenizer") from None


# -- the inputs -------------------------------------------------------------------------------------------------
def make_inputs(arch: str, cfg: ModelConfig, src: list[int], tgt: list[int] | None, start: int | None, label) -> tuple:
    """(inputs of zoo.trace.hooks.trace, token labels) for arch: the encoder_decoder's source and its target
    after the start token; decoder_only's one sequence source + start + target (start None: none between them, a
    language model's one text; prefix_len = the tokens before the target with model.mask=prefix); encoder_only's
    source. label(id) is a token's text. A <pad> token (cfg.pad_id) is padding: a key_padding_mask marks it.
    Raises TraceError for an empty source, a --tgt for encoder_only or a sequence longer than model.max_len."""
    if not src:
        raise TraceError('--src is empty: give the source sentence, e.g. --src "I love you"')
    if arch == "encoder_only" and tgt:
        raise TraceError(
            "--tgt: encoder_only reads the source alone; drop --tgt, or trace +arch=encoder_decoder "
            "or +arch=decoder_only to read a target"
        )
    tgt = tgt or []
    sep = [] if start is None else [start]
    seqs = {
        "encoder_decoder": {"src": src, "tgt": [*sep, *tgt]},
        "decoder_only": {"seq": [*src, *sep, *tgt]},
        "encoder_only": {"seq": src},
    }[arch]
    for side, ids in seqs.items():
        if len(ids) > cfg.max_len:
            what = {"src": "--src", "tgt": "<s> + --tgt", "seq": "--src" + (" + <s> + --tgt" if tgt else "")}[side]
            raise TraceError(
                f"{what} is {len(ids)} tokens, longer than model.max_len={cfg.max_len}; shorten it "
                f"(or raise model.max_len)"
            )
    inputs = {k: torch.tensor([v]) for k, v in seqs.items()}
    for k, v in seqs.items():
        if cfg.pad_id in v:  # the model's key_padding_mask: the padding columns of every mask are 0
            inputs[f"{k}_key_padding_mask"] = inputs[k] == cfg.pad_id
    if arch == "decoder_only":
        inputs["prefix_len"] = len(src) + len(sep) if cfg.mask == "prefix" else None
    return inputs, {k: [label(i) for i in v] for k, v in seqs.items()}


def checkpoint_inputs(args, ckpt: str) -> tuple:
    """(arch, model, ModelConfig, inputs, labels, vocab) of a checkpoint and --src / --tgt read with its own
    tokenizers. Raises TraceError, or WindowError for an input longer than the run trained on."""
    arch, model, cfg, src_tok, tgt_tok, trained = checkpoint_model(ckpt)
    src = encode(src_tok, TOY_SRC if args.src is None else args.src, "--src")
    tgt = encode(tgt_tok, args.tgt, "--tgt") if args.tgt else None
    check_lengths(src, tgt, trained)  # not longer than what the run trained on
    if arch == "encoder_decoder":
        src = [*src, cfg.eos_id]  # the source ends with EOS, as the translation task's
    # the decoder starts from its start token; a translation decoder_only joins source + EOS + target (zoo's
    # joined objective); a language model reads one text
    start = model.start_id if arch == "encoder_decoder" else (cfg.eos_id if src_tok is not tgt_tok else None)
    vocab = [token_label(tgt_tok, i) for i in range(cfg.vocab_size)]

    def label(i):
        return vocab[i] if i < len(vocab) else f"<{i}>"

    inputs, labels = make_inputs(arch, cfg, src, tgt, start, label)
    return arch, model, cfg, inputs, labels, vocab


def toy_inputs(args, overrides: list[str]) -> tuple:
    """(arch, model, ModelConfig, inputs, labels, vocab) of the walk-through's toy model with the overrides and
    --src / --tgt in the toy vocabulary. Raises TraceError / ConfigError."""
    arch, model, cfg = toy_model(overrides)
    src = toy_ids(TOY_SRC if args.src is None else args.src, "--src")
    tgt_text = args.tgt if args.tgt is not None else (TOY_TGT if arch != "encoder_only" else "")
    tgt = toy_ids(tgt_text, "--tgt")
    if tgt and tgt[0] == TOY_SPECIAL["bos_id"]:
        tgt = tgt[1:]  # "<s> 我 爱": the start token is added once
    inputs, labels = make_inputs(arch, cfg, src, tgt, TOY_SPECIAL["bos_id"], lambda i: TOY_VOCAB[i])
    return arch, model, cfg, inputs, labels, TOY_VOCAB
