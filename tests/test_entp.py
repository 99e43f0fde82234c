"""encoder_only's language modeling as ENTP (Ewer et al. 2024, "Encoder-only Next Token Prediction"): the exact
continuation loss against a slow per-prefix reference, bidirectional reading without a leak of the target, the
sampled training loss as an unbiased estimate, FLOPs against FlopCounterMode, the objective choice, overfitting."""

import pytest
import torch
import torch.nn.functional as F
from zoo_run import counted_flops

from zoo.model.cost import batch_flops
from zoo.model.encoder_only import prefix_next_features, prefix_rows
from zoo.tasks.lm import LanguageModeling
from zoo.tasks.objectives.entp import strata, stratified_positions

CHARS = {"chars": "".join(chr(32 + i) for i in range(65))}


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: one intra-op thread (conftest)


def lm_task(arch="encoder_only", task=None, **model):
    cfg = {**dict(vocab_size=65, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0, max_len=64), **model}
    return LanguageModeling(arch, cfg, CHARS, {"lr": 1e-3}, {"warmup_steps": 1}, **(task or {}))


def windows(B=3, T=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(0, 65, (B, T + 1), generator=g)
    return text[:, :-1], text[:, 1:]  # y = x shifted left by one


def reference_nll(model, x, y, js):
    """-log p(y[b, j] | x[b, :j+1]), the model run on each prefix alone (no padding, no batching): (B, len(js))."""
    return torch.stack(
        [
            torch.stack([F.cross_entropy(model(x[b : b + 1, : j + 1])[0, -1], y[b, j]) for j in js])
            for b in range(x.shape[0])
        ]
    )


@pytest.mark.parametrize("position", ["sinusoidal", "learned", "rope", "alibi"])
def test_exact_loss_equals_each_prefix_run_alone(position):
    """val/loss = val/cont_loss: the mean loss on targets y[:, h-1:] (h = T/2), each from its prefix x[:, :j+1]
    of length h .. T, equals a loop that runs the model on every prefix separately (1e-5), per window too."""
    torch.manual_seed(0)
    task = lm_task(position=position).eval()
    x, y = windows(3, 12)
    with torch.no_grad():
        out = task.losses((x, y))
        ref = reference_nll(task.model, x, y, range(5, 12))  # h = 6: targets 5 .. 11, prefixes of 6 .. 12
    assert task.objective == "entp" and out["loss"] is out["cont"] and task._cont_tokens == 7
    assert abs(out["cont"].item() - ref.mean().item()) < 1e-5
    torch.testing.assert_close(out["cont_windows"], ref.mean(1), rtol=0, atol=1e-5)


def test_chunked_rows_equal_one_padded_forward():
    """prefix_next_features in forwards of at most max_tokens (rows sorted by length, scattered back) gives the
    rows of one right-padded forward, in the caller's order; prefix_rows pads after each prefix."""
    torch.manual_seed(0)
    task = lm_task().eval()
    x, _ = windows(2, 10)
    row = torch.tensor([1, 0, 1, 0, 0])
    length = torch.tensor([3, 10, 1, 7, 2])
    idx, kpm = prefix_rows(x, row, length, pad_id=0)
    assert idx.shape == (5, 10) and kpm.sum(1).tolist() == [7, 0, 9, 3, 8]
    assert torch.equal(idx[0, :3], x[1, :3]) and (idx[0, 3:] == 0).all()
    with torch.no_grad():
        one = task.model.lm_head(prefix_next_features(task.model, x, row, length))
        chunked = task.model.lm_head(prefix_next_features(task.model, x, row, length, max_tokens=12))
        alone = torch.stack([task.model(x[r : r + 1, :n])[0, -1] for r, n in zip(row.tolist(), length.tolist())])
    torch.testing.assert_close(one, alone, rtol=0, atol=1e-5)
    torch.testing.assert_close(chunked, alone, rtol=0, atol=1e-5)


def test_reads_the_prefix_bidirectionally_and_never_the_target():
    """Changing an earlier token of the prefix changes the prediction at its end, and the prefix is read
    bidirectionally (an early position's state depends on a later prefix token: no causal mask); changing the
    target x[:, j+1] or anything after never changes the loss of target j (no leak)."""
    torch.manual_seed(0)
    task = lm_task().eval()
    x, y = windows(2, 12)
    cuts = torch.tensor([[5], [8]])  # targets y[0, 5] = x[0, 6] and y[1, 8] = x[1, 9]
    with torch.no_grad():
        base = task.objective_impl.nll(x, y, cuts)
        later = x.clone()
        later[0, 6:] = (x[0, 6:] + 7) % 65  # the target itself and every token after it
        later[1, 9:] = (x[1, 9:] + 7) % 65
        assert torch.equal(task.objective_impl.nll(later, y, cuts), base)
        earlier = x.clone()
        earlier[:, 1] = (x[:, 1] + 7) % 65
        assert (task.objective_impl.nll(earlier, y, cuts) - base).abs().min() > 1e-4
        h = task.model.encode(x[:, :6])
        h2 = task.model.encode(torch.cat([x[:, :4], (x[:, 4:5] + 7) % 65, x[:, 5:6]], 1))
        assert (h2[:, 1] - h[:, 1]).abs().max() > 1e-4  # position 1 reads position 4


@pytest.mark.e2e
def test_sampled_training_loss_is_unbiased():
    """The training loss draws one target per window from each of K strata of all T positions: with K = T it is
    exactly the mean over every position of the per-prefix reference; with K = 5 (strata of 2, 2, 3, 2, 3
    positions, weighted by size) its mean over 400 draws is within 4 standard errors of it; each position is
    drawn with probability 1 / its stratum's size. The targets make the weighting matter: the model's most likely
    token in the strata of 2, its least likely in those of 3 (about 3 nats apart), so equal weights (1/5 each
    instead of 2/12 and 3/12) would shift the mean by 0.1 x that gap, > 25 standard errors."""
    torch.manual_seed(0)
    task = lm_task(task={"entp_targets": 12}).eval()
    x, _ = windows(2, 12)
    size = torch.tensor([2, 2, 2, 2, 3, 3, 3, 2, 2, 3, 3, 3]).float()  # the size of each position's stratum
    with torch.no_grad():
        logits = torch.stack(
            [torch.stack([task.model(x[b : b + 1, : j + 1])[0, -1] for j in range(12)]) for b in (0, 1)]
        )
        y = torch.where(size == 2, logits.argmax(-1), logits.argmin(-1))  # (B, T)
        nll = reference_nll(task.model, x, y, range(12))  # (B, T)
        exact = nll.mean().item()
        assert abs(task.objective_impl.training_loss((x, y)).item() - exact) < 1e-5
        task.hparams.entp_targets = 5
        g = torch.Generator().manual_seed(1)
        draws = torch.tensor([task.objective_impl.training_loss((x, y), g).item() for _ in range(400)])
    se = draws.std().item() / 20
    assert se > 0  # really sampled
    assert abs(draws.mean().item() - exact) < 4 * se
    bounds = [0, 2, 4, 7, 9, 12]
    equal_weights = sum(nll[:, lo:hi].mean().item() / 5 for lo, hi in zip(bounds, bounds[1:]))
    assert abs(equal_weights - exact) > 25 * se, (equal_weights, exact, se)  # the test tells the weightings apart
    assert strata(12, 5) == bounds
    cuts = stratified_positions(torch.zeros(6000, 12), 5, g)
    assert ((cuts >= torch.tensor(bounds[:-1])) & (cuts < torch.tensor(bounds[1:]))).all()
    freq = torch.bincount(cuts.flatten(), minlength=12).float() / 6000
    assert (freq - 1 / size).abs().max() < 0.025
    assert (stratified_positions(torch.zeros(50, 12), 12, g) == torch.arange(12)).all()  # K = T: every position


def test_flops_are_the_forwards_it_runs():
    """batch_flops of a training batch equals FlopCounterMode's count of the training forwards (stratum i: B
    rows as wide as its last position, the head on one position each), between 1 and K causal forwards;
    inference_flops_per_token(T) is one forward over a T-token prefix with the head on its last position."""
    torch.manual_seed(0)
    task = lm_task(task={"entp_targets": 3}).train()
    dec = lm_task("decoder_only")
    x, y = windows(4, 16)
    assert task.batch_flops((x, y)) == counted_flops(lambda: task.training_loss((x, y))) > 0
    assert task.batch_flops((x, y)) == sum(batch_flops(task.model, 4, w, scored=4) for w in (5, 10, 16))
    assert 1.5 < task.batch_flops((x, y)) / dec.batch_flops((x, y)) < 2.5  # K = 3: widths 5 + 10 + 16 vs 16
    assert (
        task.inference_flops_per_token(16)
        == counted_flops(lambda: task.model.next_token_logits(x[:1]))
        > 10 * dec.inference_flops_per_token(16)
    )  # the causal model's is one token's pass (KV cache)


def test_objective_is_chosen_per_arch_and_refused_for_the_wrong_one():
    assert lm_task().objective == "entp" and lm_task().model.cfg.vocab_size == 65  # no <mask> token
    mlm = lm_task(task={"objective": "masked_lm"})
    assert mlm.objective == "masked_lm" and mlm.mask_id == 65 and mlm.model.cfg.vocab_size == 66
    assert lm_task("decoder_only").objective == "causal_lm"
    assert lm_task("decoder_only", mask="prefix").objective == "prefix_lm"
    assert lm_task("decoder_only", task={"objective": "prefix_lm"}, mask="prefix").hparams.objective == "prefix_lm"
    assert lm_task(task={"objective": None}).hparams.objective == "entp"  # saved resolved (checkpoints)
    with pytest.raises(
        ValueError,
        match="task.objective=entp cannot train \\+arch=decoder_only in task=lm "
        "\\(it is \\+arch=encoder_only's\\); \\+arch=decoder_only trains causal_lm",
    ):
        lm_task("decoder_only", task={"objective": "entp"})
    with pytest.raises(
        ValueError, match="task.objective=causal_lm cannot train \\+arch=encoder_only .* trains entp, masked_lm"
    ):
        lm_task(task={"objective": "causal_lm"})
    with pytest.raises(ValueError, match="masked_lm cannot train \\+arch=encoder_decoder"):
        lm_task("encoder_decoder", task={"objective": "masked_lm"})
    with pytest.raises(ValueError, match="task.objective=bert .*it is unknown"):
        lm_task(task={"objective": "bert"})
    with pytest.raises(ValueError, match="prefix_lm needs model.mask=prefix"):
        lm_task("decoder_only", task={"objective": "prefix_lm"})
    with pytest.raises(ValueError, match="task.monitor=val/mlm_acc is not logged by task.objective=entp"):
        lm_task(task={"monitor": "val/mlm_acc", "monitor_mode": "max"})
    with pytest.raises(ValueError, match="task.entp_targets=0 must be >= 1"):
        lm_task(task={"entp_targets": 0})


def test_generate_re_encodes_the_prefix():
    """Greedy ENTP decoding: every new token is the argmax at the end of the whole sequence so far, re-read
    from scratch (a slow loop), for left-padded prompts too."""
    torch.manual_seed(0)
    task = lm_task().eval()
    from zoo.model.decoding.generate import left_pad

    prompts = [[5, 6, 7, 8], [9, 10]]
    idx, kpm = left_pad(prompts, 0)
    out = task.model.generate(idx, 6, key_padding_mask=kpm, temperature=0.0)
    for p, row in zip(prompts, out.tolist()):
        seq = list(p)
        with torch.no_grad():
            for _ in range(6):
                seq.append(int(task.model(torch.tensor([seq]))[0, -1].argmax()))
        assert row[idx.shape[1] :] == seq[len(p) :]
    text = task.generate_text("AB", 5, temperature=0.0)
    assert text.startswith("AB") and len(text) == 7


@pytest.mark.e2e
def test_tiny_model_overfits_a_handful_of_windows():
    """8 windows of 24 characters: 300 Adam steps on K = 8 sampled prefixes per window bring the exact
    continuation loss from above 3.5 nats (measured 4.67) below 0.5 (measured 0.016)."""
    torch.manual_seed(0)
    task = lm_task(task={"entp_targets": 8}, d_model=32, n_heads=2, d_ff=64)
    x, y = windows(8, 24, seed=3)
    with torch.no_grad():
        before = task.eval().losses((x, y))["cont"].item()
    opt = torch.optim.Adam(task.parameters(), lr=3e-3)
    task.train()
    for _ in range(300):
        loss = task.training_loss((x, y))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = task.eval().losses((x, y))["cont"].item()
    assert before > 3.5 and after < 0.5, (before, after)
