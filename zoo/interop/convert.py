"""`python -m zoo.convert from-hf DIR out.ckpt` / `python -m zoo.convert to-hf RUN_OR_CKPT OUT_DIR`: Hugging Face
checkpoints (GPT-2, BERT, Marian, BART, T5) to zoo checkpoints and back (zoo.interop.hf; needs zoo[hf]).

from-hf: DIR is a transformers checkpoint directory (or a hub id, online); out.ckpt holds hyper_parameters
{arch, model, tokenizer (DIR's tokenizer.json and its tokenizer_config.json roles, when it has one)} and
state_dict "model.*", as zoo's runs save them, and the source's HF special-token ids, which to-hf writes back.
to-hf: RUN_OR_CKPT is a zoo .ckpt or a run directory (its best checkpoint, else checkpoints/last.ckpt); OUT_DIR
gets config.json (with the tensors' dtype), model.safetensors in the checkpoint's dtype (bfloat16 stays bfloat16),
generation_config.json (a converted model's own generation settings) and the run's tokenizer, ready for
AutoModel...from_pretrained.

examples:
  python -m zoo.convert from-hf ckpt/gpt2 gpt2.ckpt
  python -m zoo +arch=decoder_only model.init_from=ckpt/gpt2     # or fine-tune from the HF directory directly
  python -m zoo.convert to-hf outputs/2026-12-01/12-00-00 hf_out --family gpt2
Exit status 2 with a message for a missing source, an unsupported family or option, or a missing extra.
"""

import argparse
import os
import sys
from pathlib import Path


def check_source(src: str) -> None:
    """Raise FileNotFoundError for a source that names a local path (absolute, relative with ./ or ../, ~, or
    more than one '/') that does not exist; a hub id is `org/name` or `name`. Raises ValueError for an empty one
    (it would name the current directory)."""
    if not isinstance(src, str) or not src.strip():
        raise ValueError(f"source {src!r} is empty: give a transformers checkpoint directory or a hub id")
    if Path(src).expanduser().exists():
        return
    if src.startswith(("/", ".", "~")) or src.count("/") > 1 or src.endswith((".ckpt", ".json", ".safetensors")):
        raise FileNotFoundError(
            f"{src} does not exist: give a transformers checkpoint directory (config.json + "
            f"weights) or a hub id such as gpt2 or google-t5/t5-small"
        )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m zoo.convert", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("from-hf", help="a Hugging Face checkpoint -> a zoo checkpoint")
    a.add_argument("src", help="transformers checkpoint directory (config.json + weights) or hub id")
    a.add_argument("out", help="the zoo checkpoint to write (.ckpt)")
    b = sub.add_parser("to-hf", help="a zoo checkpoint or run -> a Hugging Face checkpoint directory")
    b.add_argument("src", help="a zoo .ckpt file or a run directory")
    b.add_argument("out", help="the directory to write")
    b.add_argument(
        "--family", default=None, help="HF family (default: gpt2 / bert / t5, bart, marian by arch and model.position)"
    )
    return p


def run_from_hf(src: str, out: Path) -> None:
    """from-hf: the HF checkpoint src written as the zoo checkpoint out (atomically). Raises as main catches."""
    import torch

    from zoo.interop.checkpoints import arch_of, zoo_checkpoint
    from zoo.interop.hf import from_hf
    from zoo.interop.hf_tokenizer import hf_tokenizer_state

    check_source(src)
    if out.is_dir():  # checked before the conversion, which may download a model
        raise IsADirectoryError(f"{out} is a folder; from-hf writes one file: give its name, e.g. {out / 'model.ckpt'}")
    model, cfg = from_hf(src)
    tok = hf_tokenizer_state(src) if Path(src).is_dir() else None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        torch.save(zoo_checkpoint(model, tok, source=str(src)), tmp)
        os.replace(tmp, out)  # atomic: an interrupted write never leaves a truncated out.ckpt
    finally:
        tmp.unlink(missing_ok=True)  # a failed write leaves nothing behind
    print(
        f"{out}: +arch={arch_of(model)}, {model.num_params()} parameters"
        + ("" if tok else " (no tokenizer.json in the source)")
    )


def run_to_hf(src: str, out: str, family: str | None) -> None:
    """to-hf: the zoo checkpoint or run src written as the HF checkpoint directory out. Raises as main catches."""
    from zoo.interop.checkpoints import model_from_checkpoint, read_zoo_checkpoint
    from zoo.interop.hf import hf_config, to_hf
    from zoo.interop.precision import model_dtype

    if Path(out).exists() and not Path(out).is_dir():
        raise FileExistsError(f"{out} is a file; to-hf writes a folder (config.json, weights): name one")
    ckpt = read_zoo_checkpoint(src)
    model = model_from_checkpoint(ckpt)
    written = to_hf(model, out, ckpt["hyper_parameters"].get("tokenizer"), family)
    print(
        f"{written}: {hf_config(model, family)['architectures'][0]}, "
        f"{str(model_dtype(model)).removeprefix('torch.')} tensors"
    )


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "from-hf":
            run_from_hf(args.src, Path(args.out))
        else:
            run_to_hf(args.src, args.out, args.family)
    except (ValueError, OSError, KeyError, ImportError) as e:  # OSError: a missing file, an unreachable hub
        print(f"zoo.convert: error: {e}", file=sys.stderr)
        return 2
    return 0
