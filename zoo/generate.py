"""`python -m zoo.generate ckpt_path=... prompt="ROMEO:" max_new_tokens=200 temperature=0.8 top_k=40`:
sample text from a checkpoint of a language-modeling run."""
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import yaml

from zoo.data.char_tokenizer import CharTokenizer
from zoo.model import ModelConfig, build_model

DEFAULTS = {"ckpt_path": None, "prompt": "\n", "max_new_tokens": 200, "temperature": 0.8, "top_k": None,
            "top_p": None, "seed": None, "device": "cpu"}


def load(ckpt_path: str, device: str = "cpu"):
    """(model in eval mode, tokenizer) from a zoo LM checkpoint (read with torch.load(weights_only=True)).
    Raises FileNotFoundError / ValueError with what to do."""
    path = Path(ckpt_path)
    if not path.is_file():
        raise FileNotFoundError(f"ckpt_path={ckpt_path} does not exist; use a .ckpt from a run's checkpoints/ dir")
    ckpt = torch.load(path, map_location=device, weights_only=True)
    hp = ckpt.get("hyper_parameters", {})
    if hp.get("arch") != "decoder_only":
        raise ValueError(f"{ckpt_path} is a {hp.get('arch')} checkpoint; zoo.generate samples from decoder_only "
                         f"language models (task=lm)")
    if "tokenizer" not in hp or "model" not in hp:
        raise ValueError(f"{ckpt_path} is not a zoo language-model checkpoint (no model/tokenizer hyperparameters)")
    model = build_model(hp["arch"], ModelConfig(**hp["model"]))
    state = {k[len("model."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    model.load_state_dict(state)
    return model.to(device).eval(), CharTokenizer.from_state_dict(hp["tokenizer"])


def sample(model, tokenizer, prompt: str, max_new_tokens: int, temperature: float = 0.8, top_k=None, top_p=None,
           seed=None) -> str:
    """prompt + max_new_tokens sampled characters (temperature 0 = greedy), with the KV cache.

    Beyond model.max_len the context slides: each chunk re-reads the last max_len // 2 tokens and adds up
    to max_len - that many (nanoGPT crops its context to block_size the same way, one token at a time).
    """
    device = next(model.parameters()).device
    g = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    tokens = tokenizer.encode(prompt) or [0]
    keep = max(1, model.cfg.max_len // 2)
    remaining = max_new_tokens
    while remaining > 0:
        ctx = tokens[-keep:] if len(tokens) + remaining > model.cfg.max_len else tokens
        n = min(remaining, model.cfg.max_len - len(ctx))
        idx = torch.tensor([ctx], dtype=torch.long, device=device)
        out = model.generate(idx, n, temperature=temperature, top_k=top_k, top_p=top_p, generator=g)
        tokens = tokens + out[0, len(ctx):].tolist()
        remaining -= n
    return tokenizer.decode(tokens)


def main(argv=None) -> int:
    args = dict(DEFAULTS)
    for item in sys.argv[1:] if argv is None else argv:
        key, _, value = item.partition("=")
        args[key] = value if key == "prompt" else yaml.safe_load(value)  # the prompt stays raw text
    args = SimpleNamespace(**args)
    unknown = set(vars(args)) - set(DEFAULTS)
    if unknown or args.ckpt_path is None:
        print("usage: python -m zoo.generate ckpt_path=PATH [prompt=TEXT] [max_new_tokens=N] [temperature=T] "
              "[top_k=K] [top_p=P] [seed=S] [device=cpu|cuda]" + (f"\nunknown keys: {sorted(unknown)}" if unknown else ""),
              file=sys.stderr)
        return 2
    model, tokenizer = load(str(args.ckpt_path), args.device)
    print(sample(model, tokenizer, str(args.prompt), args.max_new_tokens, args.temperature, args.top_k, args.top_p,
                 args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
