"""Report of a comparison sweep: `python -m zoo.report <multirun dir> [--out DIR] [--sentence TEXT]`.

Reads only local files (no network): every `results.json` below the multirun dir (written by zoo.train.run)
and each run's Lightning CSV log (`<run dir>/csv/metrics.csv`), and writes into --out (default: the
multirun dir):

- report.md: one table row per (cell, metric): cell (task / arch), dataset (results.json's: the built-in
  dataset's name or the user's file), objective, metric, value, parameters,
  forward FLOPs per token (results.json: zoo.model.cost.flops_per_token, classify_flops_per_token for
  classification), train time (the run's wall_seconds: data setup,
  training, validation and test). Language-modeling cells whose objective is not the causal LM (encoder_only's
  masked LM) are marked as a different objective.
- val_<task>.png: the validation curves of each task (x = optimizer step), one line per architecture, one
  panel per metric in CURVES.
- attention_<arch>.png (translation runs whose model has cross-attention, i.e. encoder_decoder): the
  cross-attention of the best checkpoint on one test sentence in the checkpoint's source language (its
  stored data settings, zoo.data.info; --sentence picks another), greedy-translated; rows = target tokens
  (the token predicted at each decoder position), columns = source tokens, labels = BPE pieces; weights of
  one decoder layer (--layer, default the last) averaged over heads, so each row sums to 1.

Exit status 2 with a one-line message for bad input (no results.json found, unreadable files).
"""
import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch

from zoo.data.info import LEGACY_LANGS, from_checkpoint

TASK_ORDER = ("classification", "lm", "translation")
ARCH_ORDER = ("encoder_only", "decoder_only", "encoder_decoder")
# (metric, where in results.json): "final" = the last value / the test split on the best checkpoint,
# "best" = the best validation value of the run
METRICS = {
    "classification": [("test/acc", "final"), ("test/f1", "final")],
    "lm": [("val/loss", "best"), ("val/cont_loss", "best")],
    "translation": [("test/bleu", "final"), ("test/chrf", "final"), ("test/bleu_beam", "final")],
}
CURVES = {"classification": ["val/acc", "val/loss"], "lm": ["val/loss", "val/cont_loss"],
          "translation": ["val/bleu", "val/loss"]}
STANDARD_OBJECTIVE = {"lm": ("causal_lm", "prefix_continuation")}  # comparable losses (nats per character)
DIFFERENT = "different objective, not comparable"  # the mark of the other objectives in the table and the plots
NOTES = {  # printed under the table
    "masked_lm": "encoder_only's masked LM: val/loss is the loss on the 15% masked characters, which the model "
                 "sees both sides of; not comparable with the causal numbers",
    "prefix_continuation": "encoder_decoder reads the first half of each window and predicts the second: its "
                           "val/loss is comparable with decoder_only's val/cont_loss (the same tokens)",
    "cmlm_mask_predict": "encoder_only translates non-autoregressively (conditional masked LM, mask-predict "
                         "decoding): its BLEU / chrF compare with the others', its val/loss (masked-token loss) "
                         "does not",
}
SPACE = "\u2581"  # the BPE's word-start mark (Metaspace)
# The first sentence of Multi30k test_2016_flickr in each of its languages; --sentence picks another
DEFAULT_SENTENCE = {"de": "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
                    "en": "A man in an orange hat starring at something.",
                    "fr": "Un homme avec un chapeau orange regardant quelque chose.",
                    "cs": "Mu\u017e v oran\u017eov\u00e9m klobouku na n\u011bco z\u00edr\u00e1."}


class ReportError(ValueError):
    """Bad input to the report (missing or unreadable run files); main() prints it and exits with 2."""


# ---- reading ---------------------------------------------------------------------------------------------
def find_runs(root: Path) -> List[dict]:
    """The results.json of every run below root (each dict gains "run_dir": its folder), ordered by task
    (TASK_ORDER), then architecture (ARCH_ORDER), then path. Raises ReportError when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise ReportError(f"{root} is not a directory; pass the multirun dir of `python -m zoo -m experiment=compare` "
                          f"(outputs/compare/<date>_<time>)")
    runs = []
    for path in sorted(root.rglob("results.json")):
        try:
            res = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ReportError(f"cannot read {path}: {e}") from None
        missing = [k for k in ("arch", "task", "final", "best", "params", "flops_per_token", "wall_seconds")
                   if k not in res]
        if missing:
            raise ReportError(f"{path} lacks {missing}: not a results.json written by `python -m zoo`")
        res["run_dir"] = str(path.parent)
        runs.append(res)
    if not runs:
        raise ReportError(f"no results.json found below {root}; is it a multirun dir whose runs finished? "
                          f"(each run writes <run dir>/results.json at its end)")

    def order(r):
        t, a = r["task"], r["arch"]
        return (TASK_ORDER.index(t) if t in TASK_ORDER else len(TASK_ORDER), t,
                ARCH_ORDER.index(a) if a in ARCH_ORDER else len(ARCH_ORDER), a, r["run_dir"])
    return sorted(runs, key=order)


def read_curves(run_dir: Path) -> Dict[str, List[Tuple[int, float]]]:
    """Every metric of a run's CSV log(s) as {name: [(step, value), ...]} in step order (empty cells skipped).
    Reads each metrics.csv below run_dir (CSVLogger: <run dir>/csv/metrics.csv); {} when there is none."""
    curves: Dict[str, List[Tuple[int, float]]] = {}
    for path in sorted(Path(run_dir).rglob("metrics.csv")):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                step = row.get("step")
                if not step:
                    continue
                for k, v in row.items():
                    if k in ("step", "epoch") or v in ("", None):
                        continue
                    curves.setdefault(k, []).append((int(float(step)), float(v)))
    return {k: sorted(v) for k, v in curves.items()}


# ---- the table -------------------------------------------------------------------------------------------
def rows(runs: List[dict]) -> List[dict]:
    """Table rows: one per (run, metric present in its results.json) with keys cell, task, arch, dataset
    (results.json's; "?" for one written before it named the data), objective,
    note (DIFFERENT for an objective outside the task's comparable ones, else ""), metric, value, params,
    flops_per_token, train_seconds, run_dir. Tasks not in METRICS report every test/
    metric of "final" and every metric of "best"."""
    out = []
    for r in runs:
        spec = METRICS.get(r["task"])
        if spec is None:
            spec = [(k, "final") for k in sorted(r["final"]) if k.startswith("test/")] + \
                   [(k, "best") for k in sorted(r["best"])]
        objective = r.get("objective", r["task"])
        note = DIFFERENT if r["task"] in STANDARD_OBJECTIVE and objective not in STANDARD_OBJECTIVE[r["task"]] else ""
        for metric, where in spec:
            value = r[where].get(metric)
            if value is None:
                continue
            out.append({"cell": f"{r['task']} / {r['arch']}", "task": r["task"], "arch": r["arch"],
                        "dataset": str(r.get("dataset", "?")),
                        "objective": objective, "note": note, "metric": metric + (" (best)" if where == "best" else ""),
                        "value": float(value), "params": int(r["params"]),
                        "flops_per_token": float(r["flops_per_token"]), "train_seconds": float(r["wall_seconds"]),
                        "run_dir": r["run_dir"]})
    return out


def fmt_value(v: float) -> str:
    return "nan" if math.isnan(v) else f"{v:.4f}"


def markdown_table(table: List[dict]) -> str:
    """The rows as a Markdown table (value with 4 decimals, FLOPs/token in millions, time in seconds)."""
    lines = ["| cell | dataset | objective | metric | value | params | FLOPs/token | train time (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table:
        obj = r["objective"] + (f" ({r['note']})" if r["note"] else "")
        dataset = r["dataset"].replace("|", "\\|")  # a user's file path may hold a pipe
        lines.append(f"| {r['cell']} | {dataset} | {obj} | {r['metric']} | {fmt_value(r['value'])} | {r['params']:,} | "
                     f"{r['flops_per_token'] / 1e6:.2f} M | {r['train_seconds']:.0f} |")
    return "\n".join(lines)


# ---- plots -----------------------------------------------------------------------------------------------
def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_curves(runs: List[dict], out_dir: Path) -> List[Path]:
    """val_<task>.png per task: one panel per metric of CURVES[task] that some run logged, one line per run
    (labelled by arch, plus the objective when it is not the task's standard one). Returns the paths."""
    plt = _plt()
    written = []
    for task in dict.fromkeys(r["task"] for r in runs):
        task_runs = [(r, read_curves(Path(r["run_dir"]))) for r in runs if r["task"] == task]
        names = CURVES.get(task) or sorted({k for _, c in task_runs for k in c if k.startswith("val/")})
        names = [n for n in names if any(n in c for _, c in task_runs)]
        if not names:
            continue
        fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
        for ax, name in zip(axes[0], names):
            for r, c in task_runs:
                if name in c:
                    steps, values = zip(*c[name])
                    label = r["arch"]
                    objective = r.get("objective", task)
                    if task in STANDARD_OBJECTIVE and objective not in STANDARD_OBJECTIVE[task]:
                        label += f" ({objective}: {DIFFERENT})"
                    elif objective not in (task, *STANDARD_OBJECTIVE.get(task, ())):
                        label += f" ({objective})"
                    ax.plot(steps, values, marker="o", markersize=3, label=label)
            ax.set_xlabel("step")
            ax.set_ylabel(name)
            ax.set_title(f"{task}: {name}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / f"val_{task}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# ---- cross-attention -------------------------------------------------------------------------------------
def load_translation_model(run: dict):
    """(model in eval mode, src tokenizer, tgt tokenizer, data settings, task hparams) from the run's best
    checkpoint (last.ckpt if it has none), tokenizers as the checkpoint keeps them; None when the run's model has no cross-attention (nothing to plot: its weights are not loaded).
    The data settings are zoo.data.info.from_checkpoint's (src_lang, tgt_lang, ...; a checkpoint from before
    they were stored: "stored": False and the languages of its datamodule hyperparameters, else LEGACY_LANGS).
    Raises ReportError when the run has no checkpoint."""
    from zoo.data.bpe import SubwordTokenizer
    from zoo.model import ModelConfig, build_model

    run_dir = Path(run["run_dir"])
    ckpt = run.get("best_checkpoint")
    if not ckpt or not Path(ckpt).is_file():
        ckpt = run_dir / "checkpoints" / "last.ckpt"
    if not Path(ckpt).is_file():
        raise ReportError(f"{run_dir}: no checkpoint (best_checkpoint in results.json nor checkpoints/last.ckpt)")
    state = torch.load(ckpt, map_location="cpu", weights_only=True)  # zoo's checkpoints hold plain data only
    hp, data = state["hyper_parameters"], from_checkpoint(state)
    model = build_model(hp["arch"], ModelConfig(**hp["model"]))
    if not has_cross_attention(model):
        return None
    model.load_state_dict({k[len("model."):]: v for k, v in state["state_dict"].items() if k.startswith("model.")})
    model.eval()
    data.setdefault("src_lang", LEGACY_LANGS[0])  # a checkpoint that names no languages at all
    data.setdefault("tgt_lang", LEGACY_LANGS[1])
    toks = {side: SubwordTokenizer.from_state_dict(hp["tokenizer"][side]) for side in ("src", "tgt")}
    return model, toks["src"], toks["tgt"], data, hp


def has_cross_attention(model) -> bool:
    """True when the model's decoder layers attend to an encoder memory (encoder_decoder)."""
    decoder = getattr(model, "decoder", None)
    return decoder is not None and any(getattr(layer, "cross_attn", None) is not None for layer in decoder.layers)


@torch.no_grad()
def cross_attention(model, src_tok, tgt_tok, sentence: str, layer: int = -1, max_len_b: int = 50):
    """Greedy-translate `sentence` and return (weights (T, S) float tensor, source pieces (S), target
    pieces (T)): the cross-attention of decoder layer `layer` averaged over heads, teacher-forced on the
    model's own greedy translation (at most source length + max_len_b tokens, as the translation task). Row i
    is the decoder position that predicts target piece i (the translation's tokens, then </s>); column j is
    source piece j (the sentence's tokens, then </s>). Rows sum to 1.
    Raises ReportError for a model without cross-attention or a layer index out of range."""
    if not has_cross_attention(model):
        raise ReportError("this model has no cross-attention (only encoder_decoder has)")
    cfg = model.cfg
    src_ids = src_tok.encode(sentence)[: cfg.max_len - 1] + [cfg.eos_id]
    src = torch.tensor([src_ids])
    out = model.generate(src, min(len(src_ids) + max_len_b, cfg.max_len - 1), temperature=0.0)[0].tolist()
    hyp = out[1:]
    hyp = hyp[:hyp.index(cfg.eos_id)] if cfg.eos_id in hyp else hyp
    tgt_in = torch.tensor([[cfg.bos_id] + hyp])
    _, attn = model(src, tgt_in, return_attention=True)
    layers = attn["decoder"]
    if not -len(layers) <= layer < len(layers):
        raise ReportError(f"--layer {layer} is out of range: the decoder has {len(layers)} layers")
    w = layers[layer][1][0].float().mean(0)  # cross weights (h, T, S) -> (T, S)
    piece = lambda tok, i: tok.tokenizer.id_to_token(i)  # noqa: E731
    return w, [piece(src_tok, i) for i in src_ids], [piece(tgt_tok, i) for i in hyp + [cfg.eos_id]]


def plot_attention(weights: torch.Tensor, src_pieces: List[str], tgt_pieces: List[str], title: str,
                   path: Path) -> Path:
    """Heat map of weights (T, S): rows = target pieces, columns = source pieces."""
    plt = _plt()
    T, S = weights.shape
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * S + 2), max(3.0, 0.4 * T + 1.5)))
    im = ax.imshow(weights.numpy(), cmap="viridis", vmin=0.0, aspect="auto")
    ax.set_xticks(range(S), src_pieces, rotation=90, fontsize=8)
    ax.set_yticks(range(T), tgt_pieces, fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def attention_maps(runs: List[dict], out_dir: Path, sentence: Optional[str] = None, layer: int = -1,
                   skipped: Optional[List[str]] = None) -> List[Path]:
    """attention_<arch>.png for each translation run whose model has cross-attention, on `sentence` or the
    DEFAULT_SENTENCE of the checkpoint's source language. Returns the paths; a run whose source language has
    no default sentence gets no map, and a line saying so is appended to `skipped`."""
    written = []
    for run in runs:
        if run["task"] != "translation":
            continue
        loaded = load_translation_model(run)
        if loaded is None:
            continue
        model, src_tok, tgt_tok, data, hp = loaded
        pair = f"{data['src_lang']}->{data['tgt_lang']}"
        if not data["stored"]:
            pair += f" ({data.get('note', 'assumed')})"
        text = sentence or DEFAULT_SENTENCE.get(data["src_lang"])
        if text is None:
            if skipped is not None:
                skipped.append(f"{run['run_dir']}: no example sentence in {data['src_lang']!r}, the source language of "
                               f"its checkpoint ({pair}); pass one with --sentence")
            continue
        w, src_pieces, tgt_pieces = cross_attention(model, src_tok, tgt_tok, text, layer, hp.get("max_len_b", 50))
        n = len(model.decoder.layers)
        hyp = "".join(tgt_pieces[:-1]).replace(SPACE, " ").strip()
        title = (f"{run['arch']} ({pair}): cross-attention, decoder layer {layer % n + 1} of {n}, mean of heads\n"
                 f"{text}\n-> {hyp if len(hyp) <= 90 else hyp[:87] + '...'}")
        written.append(plot_attention(w, src_pieces, tgt_pieces, title, out_dir / f"attention_{run['arch']}.png"))
    return written


# ---- main ------------------------------------------------------------------------------------------------
def report(root: Path, out_dir: Optional[Path] = None, sentence: Optional[str] = None, layer: int = -1) -> dict:
    """Write report.md, val_<task>.png and attention_<arch>.png into out_dir (default root).
    Returns {"table": rows, "report": path, "curves": [paths], "attention": [paths], "skipped": [attention maps
    not drawn, why]}."""
    root = Path(root)
    runs = find_runs(root)
    out_dir = Path(out_dir) if out_dir is not None else root
    out_dir.mkdir(parents=True, exist_ok=True)
    table = rows(runs)
    curves = plot_curves(runs, out_dir)
    skipped: List[str] = []
    attention = attention_maps(runs, out_dir, sentence, layer, skipped)
    notes = [f"- {o}: {NOTES[o]}" for o in dict.fromkeys(r["objective"] for r in table) if o in NOTES]
    text = [f"# Comparison report: {root}", "",
            f"{len(runs)} runs. value: test metrics on the checkpoint with the best validation score "
            f"(classification, translation) or the best validation value (lm, marked `(best)`). FLOPs/token: "
            f"forward pass (zoo.model.cost). train time: the run's wall_seconds (data setup, training, validation, "
            f"test).", "", markdown_table(table), ""]
    if notes:
        text += ["Objectives:", "", *notes, ""]
    text += ["Validation curves: " + ", ".join(f"[{p.name}]({p.name})" for p in curves)]
    if attention:
        text += ["", "Cross-attention: " + ", ".join(f"[{p.name}]({p.name})" for p in attention)]
    if skipped:
        text += ["", "Cross-attention not drawn:", "", *(f"- {line}" for line in skipped)]
    path = out_dir / "report.md"
    path.write_text("\n".join(text) + "\n")
    return {"table": table, "report": path, "curves": curves, "attention": attention, "skipped": skipped}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.report", description=__doc__.split("\n")[0])
    parser.add_argument("multirun_dir", help="a dir with runs' results.json below it (outputs/compare/<date>_<time>)")
    parser.add_argument("--out", default=None, help="where to write report.md and the PNGs (default: multirun_dir)")
    parser.add_argument("--sentence", default=None, help="source sentence of the attention maps "
                        "(default: the first test_2016_flickr sentence in each checkpoint's source language)")
    parser.add_argument("--layer", type=int, default=-1, help="decoder layer of the attention maps (default -1: last)")
    args = parser.parse_args(argv)
    try:
        out = report(Path(args.multirun_dir), args.out, args.sentence, args.layer)
    except ReportError as e:
        print(f"zoo.report: error: {e}", file=sys.stderr)
        return 2
    print(out["report"].read_text())
    for p in [*out["curves"], *out["attention"]]:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
