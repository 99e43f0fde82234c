"""A plain-PyTorch re-implementation of nanoGPT's CPU Shakespeare recipe (model.py + train.py logic:
GPT with pre-LN blocks, GELU MLP, learned positions, tied head, no bias; AdamW betas (0.9, 0.99),
wd 0.1 on matrices; warmup 100 then cosine 1e-3 -> 1e-4 over 2000 iterations; clip 1.0), written
independently of zoo's model code, as the reference for experiment=nanogpt_shakespeare_cpu.

    python experiments/nanogpt_reference.py [--seed 1337] [--iters 2000] [--estimates 200]

Prints the val loss on the same 2400 evenly spaced validation windows zoo uses, and nanoGPT's own
estimate (eval_iters=20 random batches of 12), and the wall time. nanoGPT's "1.88" is one draw of that
estimate (240 random windows); --estimates N draws it N times from the final model and prints the
spread (mean, std, min, share of draws <= 1.88), i.e. how far one draw can land from the full-val loss.
"""

import argparse
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from zoo.data.shakespeare import TinyShakespeare


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.ln_1 = nn.LayerNorm(d, bias=False)
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.attn_proj = nn.Linear(d, d, bias=False)
        self.ln_2 = nn.LayerNorm(d, bias=False)
        self.c_fc = nn.Linear(d, 4 * d, bias=False)
        self.mlp_proj = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.attn_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, block, d=128, h=4, n_layer=4):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d, bias=False)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layer))

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--estimates", type=int, default=0, help="draws of nanoGPT's 20-batch estimate to summarise")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    dm = TinyShakespeare(block_size=64, batch_size=12, val_windows=2400, mirror=os.environ.get("ZOO_DATA_MIRROR"))
    dm.setup()
    train, val = dm.train_data, dm.val_data
    model = GPT(dm.vocab_size, 64)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.99)
    )

    def get_lr(it, warmup=100, decay_iters=2000, lr=1e-3, min_lr=1e-4):
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        if it > decay_iters:
            return min_lr
        return min_lr + 0.5 * (1 + math.cos(math.pi * (it - warmup) / (decay_iters - warmup))) * (lr - min_lr)

    def batch(data):
        ix = torch.randint(len(data) - 64, (12,))
        return torch.stack([data[i : i + 64] for i in ix]), torch.stack([data[i + 1 : i + 65] for i in ix])

    t0 = time.time()
    for it in range(args.iters):
        for g in opt.param_groups:
            g["lr"] = get_lr(it)
        x, y = batch(train)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    train_s = time.time() - t0
    model.eval()
    with torch.no_grad():
        total, n = 0.0, 0
        for x, y in dm.val_dataloader():
            total += F.cross_entropy(model(x).flatten(0, 1), y.flatten(), reduction="sum").item()
            n += y.numel()
        estimate = (
            sum(F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item() for x, y in (batch(val) for _ in range(20)))
            / 20
        )
    print(
        f"seed {args.seed}: val/loss {total / n:.4f} on {len(dm.val_set)} fixed windows; nanoGPT-style estimate "
        f"(20 random batches) {estimate:.4f}; training {train_s:.1f} s for {args.iters} iterations"
    )
    if args.estimates:
        with torch.no_grad():
            draws = torch.tensor(
                [
                    sum(
                        F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                        for x, y in (batch(val) for _ in range(20))
                    )
                    / 20
                    for _ in range(args.estimates)
                ]
            )
        print(
            f"{args.estimates} draws of the 20-batch estimate: mean {draws.mean():.4f}, std {draws.std():.4f}, "
            f"min {draws.min():.4f}, max {draws.max():.4f}, share <= 1.88: {(draws <= 1.88).float().mean():.3f}"
        )


if __name__ == "__main__":
    main()
