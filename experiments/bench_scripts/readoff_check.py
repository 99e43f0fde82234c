"""Read-off budgets against separately trained runs (issue 28, experiments/RESULTS.md "Scaling").

experiment=scaling reads several token budgets off one constant-learning-rate run per cell. This compares,
at one size, the loss read off the study's run at each budget with the loss of a run trained to exactly that
budget with its own cosine decay (the check sweep in docs/scaling-laws.md):

    python experiments/bench_scripts/readoff_check.py STUDY_DIR CHECK_DIR [--size s2]

STUDY_DIR: the experiment=scaling multirun; CHECK_DIR: the multirun of
    python -m zoo -m experiment=scaling '~scaling.sizes.s1' '~scaling.sizes.s3' '~scaling.sizes.s4' \
        scaling.seeds=1 scaling.max_tokens_per_param=4,8,12 scaling.decay_to=1e-4
Prints a Markdown table: per architecture and budget, both losses (val/cont_loss, nats/char), at the same
tokens, and (read-off - decayed) / decayed in %.
"""

import argparse
import csv
import json
from pathlib import Path


def evaluations(run: Path) -> dict[int, float]:
    """{cumulative training tokens: val/cont_loss} of every validation in run/csv/metrics.csv."""
    out = {}
    with open(run / "csv" / "metrics.csv", newline="") as f:
        for row in csv.DictReader(f):
            if row.get("val/cont_loss") and row.get("cost/tokens"):
                out[int(float(row["cost/tokens"]))] = float(row["val/cont_loss"])
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("study", type=Path)
    p.add_argument("check", type=Path)
    p.add_argument("--size", default="s2")
    args = p.parse_args(argv)
    lines = [
        "| arch | tokens / param | tokens | read off (constant lr) | trained to the budget (cosine) | difference |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    diffs = []
    runs = args.check.glob(f"*-{args.size}_seed1-tpp*")
    for check in sorted(runs, key=lambda p: (p.name.split("-")[0], int(p.name.rsplit("tpp", 1)[1]))):
        arch, tpp = check.name.split(f"-{args.size}_seed1-tpp")
        results = json.loads((check / "results.json").read_text())
        tokens, decayed = int(results["final"]["cost/tokens"]), evaluations(check)
        (study,) = args.study.glob(f"{arch}-{args.size}_seed1-tpp*")
        read = evaluations(study).get(tokens)
        if read is None:
            raise SystemExit(f"{study}: no evaluation at {tokens} tokens (the check's budget); same grid?")
        d = 100 * (read - decayed[tokens]) / decayed[tokens]
        diffs.append(d)
        lines.append(f"| {arch} | {tpp} | {tokens:,} | {read:.4f} | {decayed[tokens]:.4f} | {d:+.2f}% |")
    print("\n".join(lines))
    if diffs:
        print(f"\nmean {sum(diffs) / len(diffs):+.2f}%, range {min(diffs):+.2f}% to {max(diffs):+.2f}%")


if __name__ == "__main__":
    main()
