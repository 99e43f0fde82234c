"""`python -m zoo.generate ckpt_path=... prompt="ROMEO:" max_new_tokens=200 temperature=0.8 top_k=40`:
sample text from a checkpoint of a language-modeling run."""
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

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
    if "tokenizer" not in hp or "model" not in hp:
        raise ValueError(f"{ckpt_path} is not a zoo language-model checkpoint (no model/tokenizer hyperparameters)")
    model = build_model(hp["arch"], ModelConfig(**hp["model"]))
    state = {k[len("model."):]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    model.load_state_dict(state)
    return model.to(device).eval(), CharTokenizer.from_state_dict(hp["tokenizer"])


def sample(model, tokenizer, prompt: str, max_new_tokens: int, temperature: float = 0.8, top_k=None, top_p=None,
           seed=None) -> str:
    """prompt + max_new_tokens sampled characters (temperature 0 = greedy). The prompt is cut to the
    last model.max_len - max_new_tokens characters."""
    room = model.cfg.max_len - max_new_tokens
    if room < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be below model.max_len={model.cfg.max_len}")
    device = next(model.parameters()).device
    idx = torch.tensor([tokenizer.encode(prompt)[-room:]], dtype=torch.long, device=device)
    g = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p, generator=g)
    return tokenizer.decode(out[0].tolist())


def main(argv=None) -> int:
    args = OmegaConf.merge(OmegaConf.create(DEFAULTS), OmegaConf.from_dotlist(list(argv or sys.argv[1:])))
    unknown = set(args) - set(DEFAULTS)
    if unknown or args.ckpt_path is None:
        print(f"usage: python -m zoo.generate ckpt_path=PATH [prompt=TEXT] [max_new_tokens=N] [temperature=T] "
              f"[top_k=K] [top_p=P] [seed=S] [device=cpu|cuda]" + (f"\nunknown keys: {sorted(unknown)}" if unknown else ""),
              file=sys.stderr)
        return 2
    model, tokenizer = load(args.ckpt_path, args.device)
    print(sample(model, tokenizer, str(args.prompt), args.max_new_tokens, args.temperature, args.top_k, args.top_p,
                 args.seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
