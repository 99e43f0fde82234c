"""The report's Scaling section of a translation study (experiment=scaling_translation): zoo.report.scaling's
section on the translation cells' points (D: target tokens; the loss: cross-entropy per target token on the
validation set), titled by the task and its languages, and what a loss means: each family's BLEU and chrF
(sacreBLEU, greedy decoding of a fixed subset of the validation set, zoo.run.scaling_translation) at each size's
largest budget, with an example, and the loss with another pair's source (does the model read it?).

A folder that also holds an LM study's points keeps the translation study's files (points.csv, figures) in its
translation/ subfolder."""

import re
from pathlib import Path

from zoo.report.runs import arch_label
from zoo.report.scaling import scaling_section
from zoo.report.scaling_points import scaling_points

SUBFOLDER = "translation"  # the translation study's files beside an LM study's
CONTROL = ("loss_own_source", "loss_other_source")  # zoo.run.scaling_translation.source_control's record
TEST = ("test_loss", "test_bleu", "test_chrf")  # held_out_scores': the test split, read by nothing else


def translation_cells(runs: list[dict]) -> list[dict]:
    """The finished translation runs that are scaling cells (results.json with a "scaling" record)."""
    return [r for r in runs if r.get("task") == "translation" and r.get("scaling") and r.get("status", "ok") == "ok"]


def study(runs: list[dict]) -> dict:
    """The section's title and meanings (zoo.report.scaling.scaling_section's `study`) for these cells: the title
    names the task, its languages and data ("Scaling: translation en → es (bible_en_es)")."""
    data = runs[0].get("data") or {}
    pair = f" {data['src_lang']} → {data['tgt_lang']}" if data.get("src_lang") and data.get("tgt_lang") else ""
    name = f" ({runs[0]['dataset']})" if runs[0].get("dataset") else ""
    return {
        "title": f"Scaling: translation{pair}{name}",
        "task": "translation",
        "D": "the target tokens trained (each sentence's with its EOS)",
        "loss": "val/loss (cross-entropy per target token on the validation set, no label smoothing)",
    }


def quality_rows(runs: list[dict]) -> list[dict]:
    """Per family and size, the BLEU / chrF records of its cells (translations.json), seeds together:
    {arch, size, N, tokens_per_param, loss, bleu, chrf (lists over seeds), sentences, example}, smallest N first;
    with CONTROL and TEST (lists over the seeds that have them) where a cell has zoo.run.scaling_translation's
    source_control and held_out_scores records."""
    rows = {}
    for run in runs:
        t = run.get("translation")
        if not t:
            continue
        key = (arch_label(run), run["scaling"]["size"])
        row = rows.setdefault(
            key,
            {"arch": key[0], "size": key[1], "N": run["params_non_embedding"], "loss": [], "bleu": [], "chrf": []},
        )
        for k in ("loss", "bleu", "chrf"):
            row[k].append(float(t[k]))
        for k in (*CONTROL, *TEST):  # cells scored before source_control or held_out_scores have none
            if k in t:
                row.setdefault(k, []).append(float(t[k]))
        if "test_loss" in t:
            row.setdefault("test_seeds_loss", []).append(float(t["loss"]))  # their validation loss
        row.update(tokens_per_param=t["tokens_per_param"], sentences=t["sentences"])
        row.setdefault("example", (t.get("examples") or [None])[0])
    return sorted(rows.values(), key=lambda r: (r["N"], r["arch"]))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def quality_table(rows: list[dict]) -> list[str]:
    """What a loss means: the table of quality_rows (means over seeds) and one example at the largest size."""
    if not rows:
        return []
    n = rows[0]["sentences"]
    lines = [
        f"What a loss means: BLEU and chrF (sacreBLEU's defaults, 0-100) of greedy translations of {n} validation "
        "sentences (the same for every family, evenly spaced over the validation set) at each size's largest "
        "budget, means over seeds; the loss of that point beside them. Does the model read the source? The loss "
        "of those sentences with their own source, and with another's (far away in the validation set, of about "
        "its length; zoo.run.scaling_translation.source_control): a model that ignores the source scores both "
        "alike, so the gap is what the source is worth to it, in nats per target token.",
        "",
        "| arch | size | N | tokens / param | seeds | loss | BLEU | chrF | own source | another's source | gap |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        own, other = r.get("loss_own_source"), r.get("loss_other_source")
        control = f"{_mean(own):.4f} | {_mean(other):.4f} | {_mean(other) - _mean(own):+.4f}" if own else "– | – | –"
        lines.append(
            f"| {r['arch']} | {r['size']} | {r['N']:,} | {r['tokens_per_param']:g} | {len(r['loss'])} | "
            f"{_mean(r['loss']):.4f} | {_mean(r['bleu']):.2f} | {_mean(r['chrf']):.2f} | {control} |"
        )
    lines += held_out_table(rows)
    top = max(r["N"] for r in rows)
    for r in rows:
        if r["N"] == top and r.get("example"):
            ex = r["example"]
            lines += [
                "",
                f"{r['arch']} {r['size']}: source `{ex['src']}`; reference `{ex['ref']}`; "
                f"hypothesis `{ex['hyp'].strip() or '(empty)'}`",
            ]
    return [*lines, ""]


def held_out_table(rows: list[dict]) -> list[str]:
    """The test split at each size's largest budget (means over the seeds scored on it), beside the validation
    loss of the same point; [] when no cell has a test score."""
    rows = [r for r in rows if r.get("test_loss")]
    if not rows:
        return []
    lines = [
        "",
        "The test split, which nothing else reads (the validation set picks the rates and gives the points): the "
        "loss of the whole split, and BLEU and chrF of the same number of its sentences, evenly spaced, at each "
        "size's largest budget, means over the seeds scored on it.",
        "",
        "| arch | size | seeds | validation loss | test loss | test BLEU | test chrF |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['arch']} | {r['size']} | {len(r['test_loss'])} | {_mean(r['test_seeds_loss']):.4f} | "
            f"{_mean(r['test_loss']):.4f} | {_mean(r['test_bleu']):.2f} | {_mean(r['test_chrf']):.2f} |"
        )
    return lines


def _relinked(lines: list[str], names: list[str]) -> list[str]:
    """The section's links to its files, pointed into SUBFOLDER."""
    pattern = re.compile(r"\]\((" + "|".join(re.escape(n) for n in names) + r")\)")
    return [pattern.sub(rf"]({SUBFOLDER}/\1)", line) for line in lines]


def translation_section(runs: list[dict], out_dir: Path, scaling_sweep: bool = False) -> tuple[list[str], list[Path]]:
    """report.md's Scaling section of the translation cells among `runs` (zoo.report.scaling.scaling_section with
    study()), followed by the BLEU / chrF table; ([], []) without translation cells. Its files go into out_dir, or
    out_dir/translation/ when LM runs there have scaling points too."""
    cells = translation_cells(runs)
    if not cells:
        return [], []
    folder = Path(out_dir)
    nested = bool(scaling_points(runs, "lm"))
    if nested:
        folder = folder / SUBFOLDER
        folder.mkdir(parents=True, exist_ok=True)
    text, figures = scaling_section(cells, folder, scaling_sweep, study(cells))
    if not text:
        return [], []
    if nested:
        text = _relinked(text, ["points.csv", "lr_sweep.csv", *(p.name for p in figures)])
    return [*text, "", *quality_table(quality_rows(cells))], figures
