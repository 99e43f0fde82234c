"""Cross-attention maps of zoo.report: the best checkpoint of a translation run whose model has cross-attention
(encoder_decoder), greedy-translating one test sentence in the checkpoint's source language.

Rows = target tokens (the token predicted at each decoder position), columns = source tokens, labels = BPE
pieces; weights of one decoder layer (--layer, default the last) averaged over heads, so each row sums to 1.
"""

from collections.abc import Callable
from pathlib import Path

import torch

from zoo.data.info import LEGACY_LANGS, from_checkpoint
from zoo.report.runs import ReportError, read_examples, slug

SPACE = "\u2581"  # the BPE's word-start mark (Metaspace)
# The first sentence of Multi30k test_2016_flickr in each of its languages: the default of a run on that test set
# whose examples.json predates its "src" field (default_sentence); --sentence picks another
DEFAULT_SENTENCE = {
    "de": "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "en": "A man in an orange hat starring at something.",
    "fr": "Un homme avec un chapeau orange regardant quelque chose.",
    "cs": "Mu\u017e v oran\u017eov\u00e9m klobouku na n\u011bco z\u00edr\u00e1.",
}


def _clip(text: str, width: int = 90) -> str:
    """text, cut to `width` characters with "..." (a figure title's line)."""
    return text if len(text) <= width else text[: width - 3] + "..."


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load_translation_model(run: dict):
    """(model in eval mode, src tokenizer, tgt tokenizer, data settings, task hparams) from the run's best
    checkpoint (last.ckpt if it has none), tokenizers as the checkpoint keeps them; None when the run's model has no
    cross-attention (nothing to plot: its weights are not loaded).
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
    model.load_state_dict({k[len("model.") :]: v for k, v in state["state_dict"].items() if k.startswith("model.")})
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
    hyp = hyp[: hyp.index(cfg.eos_id)] if cfg.eos_id in hyp else hyp
    tgt_in = torch.tensor([[cfg.bos_id] + hyp])
    _, attn = model(src, tgt_in, return_attention=True)
    layers = attn["decoder"]
    if not -len(layers) <= layer < len(layers):
        raise ReportError(f"--layer {layer} is out of range: the decoder has {len(layers)} layers")
    w = layers[layer][1][0].float().mean(0)  # cross weights (h, T, S) -> (T, S)
    piece = lambda tok, i: tok.tokenizer.id_to_token(i)  # noqa: E731
    return w, [piece(src_tok, i) for i in src_ids], [piece(tgt_tok, i) for i in hyp + [cfg.eos_id]]


def plot_attention(weights: torch.Tensor, src_pieces: list[str], tgt_pieces: list[str], title: str, path: Path) -> Path:
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


def default_sentence(run: dict, data: dict) -> tuple[str | None, str]:
    """(sentence, where it comes from) of a run's attention map when no --sentence is given: the first source
    sentence of the run's own test set, i.e. examples.json's "src" at its first id (the lowest: the translation
    task writes them in order). A run whose
    examples.json has no "src" (written before zoo kept it) gets the first test_2016_flickr sentence in its
    source language (DEFAULT_SENTENCE) when `data` (zoo.data.info.from_checkpoint) is the built-in Multi30k
    tested on test_2016_flickr, or a checkpoint from before data settings were kept (Multi30k assumed);
    otherwise (None, why not)."""
    ex, _ = read_examples(run)
    src = ex.get("src") if ex is not None else None
    dataset = data.get("dataset") if data.get("stored") else run.get("dataset", "?")
    if isinstance(src, list) and src and len(src) == len(ex["ids"]) and str(src[0]).strip():
        return str(src[0]), f"{dataset} test example {ex['ids'][0]}"
    multi30k = not data.get("stored") or (
        data.get("dataset") == "multi30k"
        and data.get("builtin", True)
        and data.get("test_split", "test_2016_flickr") == "test_2016_flickr"
    )
    if multi30k and DEFAULT_SENTENCE.get(data.get("src_lang")):
        return DEFAULT_SENTENCE[data["src_lang"]], "multi30k test_2016_flickr sentence 1"
    return None, (
        f'no source sentence of its own test set ({dataset}): its examples.json has no "src" and its data '
        f"is not the built-in Multi30k test_2016_flickr; pass one with --sentence"
    )


def attention_maps(
    groups: list[dict],
    out_dir: Path,
    sentence: str | None = None,
    layer: int = -1,
    skipped: list[str] | None = None,
    attend: Callable | None = None,
) -> list[Path]:
    """attention_<group label>.png for each translation group whose model has cross-attention, from its first
    finished run (the lowest seed), on `sentence` or the first source sentence of the run's own test set
    (default_sentence). The title names the group, seed, dataset, language pair and where the sentence comes from.
    attend: the cross_attention function to call (zoo.report passes its own name, so a test can wrap it).
    Returns the paths; a run without a checkpoint, or without a sentence of its own test set, gets no map, and
    a line saying so is appended to `skipped`; a scaling cell (zoo.run.scaling_cell: no checkpoint kept) gets
    neither."""
    attend = attend or cross_attention
    written = []
    for group in groups:
        if group["task"] != "translation" or not group["ok"]:
            continue
        run = group["ok"][0]
        if run["arch"] in ("encoder_only", "decoder_only"):  # no cross-attention: nothing to load
            continue
        if run.get("scaling"):  # a scaling study's cell keeps no checkpoint by design: its points are its record
            continue
        try:
            loaded = load_translation_model(run)
        except ReportError as e:  # a run without checkpoint (deleted, or never written) still has its table row
            if skipped is not None:
                skipped.append(str(e))
            continue
        if loaded is None:
            continue
        path = _draw_map(group, run, loaded, out_dir, sentence, layer, skipped, attend)
        if path is not None:
            written.append(path)
    return written


def _draw_map(
    group: dict,
    run: dict,
    loaded: tuple,
    out_dir: Path,
    sentence: str | None,
    layer: int,
    skipped: list[str] | None,
    attend: Callable,
) -> Path | None:
    """Plot the cross-attention map of one group's run (loaded: load_translation_model's tuple) and return its
    path; None, with a line appended to `skipped`, when there is no sentence to attend over."""
    model, src_tok, tgt_tok, data, hp = loaded
    pair = f"{data['src_lang']}->{data['tgt_lang']}"
    if not data["stored"]:
        pair += f" ({data.get('note', 'assumed')})"
    text, source = (sentence, "--sentence") if sentence else default_sentence(run, data)
    if text is None:
        if skipped is not None:
            skipped.append(f"{run['run_dir']}: {source}")
        return None
    dataset = data.get("dataset") if data.get("stored") else group["dataset"]
    w, src_pieces, tgt_pieces = attend(model, src_tok, tgt_tok, text, layer, hp.get("max_len_b", 50))
    n = len(model.decoder.layers)
    hyp = "".join(tgt_pieces[:-1]).replace(SPACE, " ").strip()
    seed = f", seed {run['seed']}" if run.get("seed") is not None else ""
    title = (
        f"{group['label']}{seed} ({dataset}, {pair}): cross-attention, decoder layer {layer % n + 1} of {n}, "
        f"mean of heads\n{source}: {_clip(text)}\n-> {_clip(hyp)}"
    )
    path = out_dir / f"attention_{slug(group['label'])}.png"
    return plot_attention(w, src_pieces, tgt_pieces, title, path)
