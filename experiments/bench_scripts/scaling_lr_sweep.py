"""The learning-rate sweep behind experiment=scaling's per-size `lr` (experiments/RESULTS.md, "Scaling"): one
size of decoder_only at one peak rate, trained as the study trains a budget (warm-up over N tokens, the peak
rate, a 1 - sqrt cool-down over the budget's last 20%, AdamW with betas (0.9, 0.99), weight decay 0.1, gradient
clip 1.0) on the 42 Shakespeare plays, in a plain loop over zoo's own task (no Lightning: the same model, loss and
fused AdamW). Prints one JSON line: the continuation loss on the study's 256 validation windows.

    ZOO_DATA_MIRROR=../shared/data OMP_NUM_THREADS=1 python experiments/bench_scripts/scaling_lr_sweep.py \\
        --d 32 --L 2 --h 2 --batch 4 --lr 8e-3 --tpp 10
"""

import argparse
import json
import math
import tempfile
import time

import torch

from zoo.data.text_corpus import TextCorpus
from zoo.model.cost import non_embedding_param_count
from zoo.run.job import compose_job, job_task
from zoo.scaling.sizes import d_ff, layers
from zoo.training.optim import adamw, clip_grad_norm, warmup_stable_decay


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", default="decoder_only")
    p.add_argument("--d", type=int, required=True, help="d_model")
    p.add_argument("--L", type=int, required=True, help="n_layers (encoder_decoder: half a side)")
    p.add_argument("--h", type=int, default=2, help="n_heads")
    p.add_argument("--batch", type=int, required=True, help="windows of 128 tokens a step")
    p.add_argument("--lr", type=float, required=True, help="peak learning rate")
    p.add_argument("--tpp", type=float, default=10, help="the budget in tokens per non-embedding parameter")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    dm = TextCorpus(file="shakespeare_plays", block_size=128, batch_size=a.batch, val_windows=256)
    dm.prepare_data()
    dm.setup()
    info = dm.model_info()
    arch = "decoder_only" if a.arch == "prefix_lm" else a.arch
    overrides = [
        f"+arch={a.arch}",
        "task=lm",
        f"model.d_model={a.d}",
        f"model.n_heads={a.h}",
        f"model.n_layers={layers(arch, a.L)}",
        f"model.d_ff={d_ff(arch, a.d)}",
        "model.dropout=0.0",
        "model.share_embeddings=true",
        f"seed={a.seed}",
    ]
    task = job_task(compose_job(overrides, tempfile.mkdtemp()), info, "sweep")
    N = non_embedding_param_count(task.model)
    per_step = a.batch * 128
    warm, end = max(1, round(N / per_step)), round(a.tpp * N / per_step)
    start = round(0.8 * end)
    opt = adamw(task.model, a.lr, (0.9, 0.99), 0.1, 1e-8)
    t0 = time.time()
    task.train()
    for step in range(end):
        for g in opt.param_groups:
            g["lr"] = warmup_stable_decay(step, warm, start, end, a.lr, 0.0, "1-sqrt")
        items = [dm.train_set[step * a.batch + i] for i in range(a.batch)]
        batch = torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])
        task.training_loss(batch).backward()
        clip_grad_norm(list(task.model.parameters()), 1.0, opt)
        opt.step()
        opt.zero_grad(set_to_none=True)
    task.eval()
    windows = [dm.val_set[i] for i in range(len(dm.val_set))]
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(windows), 64):
            x = torch.stack([w[0] for w in windows[i : i + 64]])
            y = torch.stack([w[1] for w in windows[i : i + 64]])
            out = task.losses((x, y), task.objective_impl.validation_generator(i, x.device))
            total += float(out.get("cont", out["loss"])) * len(x)
    loss = total / len(windows)
    assert math.isfinite(loss)
    row = dict(arch=a.arch, d=a.d, L=a.L, N=N, batch=a.batch, lr=a.lr, tpp=a.tpp, steps=end, loss=round(loss, 5))
    print(json.dumps({**row, "seconds": round(time.time() - t0, 1)}), flush=True)


if __name__ == "__main__":
    main()
