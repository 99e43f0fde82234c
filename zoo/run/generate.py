"""`python -m zoo.generate ckpt_path=... prompt="ROMEO:" max_new_tokens=200 temperature=0.8 top_k=40`:
sample text from a checkpoint of a language-modeling run. The checkpoint's data settings (zoo.data.info:
the text it was trained on, its tokenizer) decide what it accepts, and messages name that data."""

import sys
from types import SimpleNamespace

import torch
import yaml

from zoo.data.bpe import tokenizer_from_state
from zoo.data.info import from_checkpoint
from zoo.errors import is_number, is_whole
from zoo.model import ModelConfig, build_model
from zoo.model.checkpoint_file import read_checkpoint_file, run_checkpoint
from zoo.model.decoding.sampling import sample
from zoo.run.threads import set_threads

DEFAULTS = {
    "ckpt_path": None,
    "prompt": "\n",
    "max_new_tokens": 200,
    "temperature": 0.8,
    "top_k": None,
    "top_p": None,
    "seed": None,
    "device": "cpu",
    "threads": None,
}


def read_checkpoint(ckpt_path: str) -> dict:
    """The checkpoint ckpt_path names (a .ckpt file, or a run directory: its best, else last, checkpoint; see
    zoo.model.checkpoint_file.run_checkpoint), read on the CPU with torch.load(weights_only=True) (load() moves
    the model). Raises FileNotFoundError / ValueError with what to do."""
    path, _ = run_checkpoint(ckpt_path)
    return read_checkpoint_file(path, "use a .ckpt from a run's checkpoints/ dir, or the run's directory")


def load(ckpt_path: str, device: str = "cpu", ckpt: dict | None = None):
    """(model in eval mode, tokenizer, context_len) from a zoo LM checkpoint (read_checkpoint, unless the
    loaded `ckpt` is passed); context_len is the training block_size (None for checkpoints that did not
    record it). Raises FileNotFoundError / ValueError with what to do, naming the data it was trained on."""
    ckpt = read_checkpoint(ckpt_path) if ckpt is None else ckpt
    hp, data = ckpt.get("hyper_parameters", {}), from_checkpoint(ckpt)
    trained_on = f" (trained on {data['dataset']})" if data["stored"] else ""
    if hp.get("arch") != "decoder_only":
        raise ValueError(
            f"{ckpt_path} was trained with +arch={hp.get('arch')}{trained_on}; zoo.generate samples from "
            f"decoder_only language models (task=lm)"
        )
    tok_state = hp.get("tokenizer", {})
    kind = data.get("tokenizer", {}).get("kind") or ("char" if "chars" in tok_state else None)
    if kind not in ("char", "bpe", "pretrained") or "model" not in hp or not ({"chars", "json"} & set(tok_state)):
        raise ValueError(
            f"{ckpt_path} is not a checkpoint of a language model (task=lm){trained_on}"
            + (f", its tokenizer is {kind}" if kind else "")
            + "; zoo.generate samples from those"
        )
    model = build_model(hp["arch"], ModelConfig(**hp["model"]))
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    model.load_state_dict(state)
    return model.to(device).eval(), tokenizer_from_state(tok_state), hp.get("context_len")


USAGE = (
    "usage: python -m zoo.generate ckpt_path=PATH [prompt=TEXT] [max_new_tokens=N] [temperature=T] "
    "[top_k=K] [top_p=P] [seed=S] [device=cpu|cuda] [threads=N]"
)
HELP = f"""{USAGE}

Sample text from a checkpoint of a language-modeling run (task=lm) with its KV cache.
  ckpt_path       a run's .ckpt file (its checkpoints/ dir), or the run's directory (its best checkpoint)
  prompt          the text to continue (default a newline); its characters must be in the run's vocabulary
  max_new_tokens  tokens to add (default {DEFAULTS["max_new_tokens"]})
  temperature     0 = greedy (default {DEFAULTS["temperature"]})
  top_k, top_p    sample from the k most likely tokens / the smallest set holding probability p
  seed            a fixed seed gives the same text again
  device          cpu (default) or cuda[:N]
  threads         torch's CPU threads, threads=N as in training (default: the cores, or OMP_NUM_THREADS if set)"""


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(HELP)
        return 0
    args = dict(DEFAULTS)
    for item in argv:
        key, _, value = item.partition("=")
        args[key] = value if key == "prompt" else yaml.safe_load(value)  # the prompt stays raw text
    args = SimpleNamespace(**args)
    unknown = set(vars(args)) - set(DEFAULTS)
    if unknown or args.ckpt_path is None:
        print(
            USAGE + (f"\nunknown keys: {sorted(unknown)}" if unknown else ""),
            file=sys.stderr,
        )
        return 2
    try:
        check_args(args)
        set_threads({"threads": args.threads})  # training's threads= (zoo.run.threads): one process here
        ckpt = read_checkpoint(str(args.ckpt_path))
        model, tokenizer, context_len = load(str(args.ckpt_path), args.device, ckpt)
        check_prompt(tokenizer, str(args.prompt), from_checkpoint(ckpt))
        text = sample(
            model,
            tokenizer,
            str(args.prompt),
            args.max_new_tokens,
            args.temperature,
            args.top_k,
            args.top_p,
            args.seed,
            context_len,
        )
    except (FileNotFoundError, ValueError) as e:  # bad input: say what and how to fix, no traceback
        print(f"zoo.generate: error: {e}", file=sys.stderr)
        return 2
    print(text)
    return 0


def check_prompt(tokenizer, prompt: str, data: dict) -> None:
    """Raise ValueError for a prompt character the checkpoint's tokenizer lacks, naming the training text
    (the checkpoint's data settings, zoo.data.info) whose characters the vocabulary holds."""
    try:
        tokenizer.encode(prompt)
    except ValueError as e:
        text = data["dataset"] if data["stored"] else "the model's training text"
        raise ValueError(
            f"prompt: {e}: its {tokenizer.vocab_size} characters are those of {text}; write the prompt with those"
        ) from None


def check_args(args) -> None:
    """Raise ValueError for a sampling option of the wrong type or range (before loading anything)."""
    if not is_whole(args.max_new_tokens) or args.max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={args.max_new_tokens!r} must be an integer >= 0")
    if not is_number(args.temperature) or args.temperature < 0:
        raise ValueError(f"temperature={args.temperature!r} must be a number >= 0 (0 = greedy)")
    if args.top_k is not None and (not is_whole(args.top_k) or args.top_k < 1):
        raise ValueError(f"top_k={args.top_k!r} must be an integer >= 1, or omitted")
    if args.top_p is not None and (not isinstance(args.top_p, (int, float)) or not 0 < args.top_p <= 1):
        raise ValueError(f"top_p={args.top_p!r} must be in (0, 1], or omitted")
    if args.seed is not None and (not is_whole(args.seed) or int(args.seed) < 0):
        raise ValueError(f"seed={args.seed!r} must be a non-negative integer, or omitted")
    if args.device not in ("cpu", "cuda") and not str(args.device).startswith("cuda:"):
        raise ValueError(f"device={args.device!r} must be cpu or cuda[:N]")
    if str(args.device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={args.device!r}: this torch sees no CUDA GPU; use device=cpu")
