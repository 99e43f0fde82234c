"""Classification and translation tasks: their pieces against hand computations, and short real runs."""

import json

import pytest
import torch
import torch.nn.functional as F
from zoo_run import SHORT_RUN, make_cfg

from zoo.data.bpe import SubwordTokenizer, train_bpe
from zoo.errors import ConfigError
from zoo.model import ModelConfig, build_model
from zoo.model.cost import classify_flops_per_token
from zoo.run.train import run
from zoo.tasks.classification import Classification
from zoo.tasks.objectives.joined import join_source_target
from zoo.tasks.translation import Translation

SMALL = SHORT_RUN


def test_join_source_target_by_hand():
    pad = 0
    src = torch.tensor([[7, 8, 2, 0], [9, 2, 0, 0]])
    tgt = torch.tensor([[5, 2, 0], [4, 6, 2]])
    seq, kpm, src_len, seq_len = join_source_target(src, src == 0, tgt, tgt == 0, pad)
    assert seq.tolist() == [[7, 8, 2, 5, 2], [9, 2, 4, 6, 2]]
    assert kpm.tolist() == [[False] * 5, [False] * 5]
    assert src_len.tolist() == [3, 2] and seq_len.tolist() == [5, 5]
    seq, kpm, _, _ = join_source_target(src[:1], src[:1] == 0, tgt[:1, :2], tgt[:1, :2] == 0, pad)
    assert seq.tolist() == [[7, 8, 2, 5, 2]]


def test_translation_loss_ignores_padding_exactly():
    """The task's loss equals label-smoothed cross-entropy averaged over real target tokens only,
    computed token by token (Szegedy et al. 2016: (1 - eps) * NLL + eps * mean over classes of -log p)."""
    tok = SubwordTokenizer(train_bpe(["ein hund läuft", "a dog runs"], 30)).state_dict()
    model = dict(vocab_size=20, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0)
    task = Translation("encoder_decoder", model, {"src": tok, "tgt": tok}, {"lr": 1e-3}, {"warmup_steps": 1})
    src = torch.tensor([[5, 6, 2], [7, 2, 0]])
    tgt_in = torch.tensor([[1, 8, 9], [1, 10, 0]])
    tgt_out = torch.tensor([[8, 9, 2], [10, 2, 0]])
    batch = {
        "src": src,
        "src_key_padding_mask": src == 0,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_key_padding_mask": tgt_out == 0,
    }
    got = task.loss(batch)
    logp = task.model(src, tgt_in, src == 0, tgt_out == 0).log_softmax(-1)
    terms = [
        0.9 * -logp[b, t, tgt_out[b, t]] + 0.1 * -logp[b, t].mean()
        for b in range(2)
        for t in range(3)
        if tgt_out[b, t] != 0
    ]
    assert abs(got.item() - torch.stack(terms).mean().item()) < 1e-5


@pytest.mark.parametrize("arch", ["encoder_decoder", "decoder_only"])
def test_translation_loss_masks_padding_by_position(arch):
    """A real target token whose id equals the pad id still counts: padding is chosen by the key padding mask,
    never by token id (so the loss cannot silently skip a real token)."""
    tok = SubwordTokenizer(train_bpe(["ein hund läuft", "a dog runs"], 30)).state_dict()
    model = dict(vocab_size=20, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0)
    task = Translation(arch, model, {"src": tok, "tgt": tok}, {"lr": 1e-3}, {"warmup_steps": 1}, label_smoothing=0.0)
    src = torch.tensor([[5, 6, 2], [7, 2, 0]])
    src_kpm = torch.tensor([[False, False, False], [False, False, True]])
    tgt_out = torch.tensor([[8, 0, 2], [10, 2, 0]])  # row 0's second token is a real token with the pad id
    tgt_kpm = torch.tensor([[False, False, False], [False, False, True]])
    tgt_in = torch.cat([torch.ones(2, 1, dtype=torch.long), tgt_out[:, :-1]], 1)
    batch = {
        "src": src,
        "src_key_padding_mask": src_kpm,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_key_padding_mask": tgt_kpm,
    }
    got = task.loss(batch)
    if arch == "encoder_decoder":
        logp = task.model(src, tgt_in, src_kpm, tgt_kpm).log_softmax(-1)  # (B, T, V)
        terms = [-logp[b, t, tgt_out[b, t]] for b in range(2) for t in range(3) if not tgt_kpm[b, t]]
    else:  # source + target as one sequence: the token at position p is predicted at p - 1
        seq, kpm, src_len, seq_len = join_source_target(src, src_kpm, tgt_out, tgt_kpm, 0)
        logp = task.model(seq[:, :-1], key_padding_mask=kpm[:, :-1], prefix_len=src_len).log_softmax(-1)
        terms = [-logp[b, p - 1, seq[b, p]] for b in range(2) for p in range(int(src_len[b]), int(seq_len[b]))]
    assert len(terms) == 5  # the pad-id token of row 0 is among them
    assert abs(got.item() - torch.stack(terms).mean().item()) < 1e-5


@pytest.mark.e2e
def test_task_and_data_that_do_not_fit_are_refused_before_work(tmp_path):
    """A task given a datamodule of another kind of batch names the data configs that fit, before any data is
    touched; a task without data= gets its natural dataset."""
    with pytest.raises(
        ConfigError,
        match="LanguageModeling reads lm batches, but data._target_=zoo.data.sst2.SST2 "
        "gives classification batches; use data=text_corpus or data=tiny_shakespeare",
    ):
        run(make_cfg(tmp_path, ["data=sst2", "data.data_dir=/nonexistent", "data.mirror=/nonexistent"]))
    with pytest.raises(
        ConfigError,
        match="Translation reads translation batches, .*TinyShakespeare gives lm "
        "batches; use data=bible_en_es or data=multi30k or data=parallel_text",
    ):
        run(make_cfg(tmp_path, ["task=translation", "data=tiny_shakespeare"], arch="decoder_only"))
    with pytest.raises(ConfigError, match="Classification reads .* use data=sst2 or data=text_classification"):
        run(make_cfg(tmp_path, ["data=multi30k"], arch="encoder_only"))
    natural = {"lm": "TinyShakespeare", "classification": "SST2", "translation": "Multi30k"}
    for task, data in natural.items():  # task= alone picks its dataset, whatever the arch's own task
        assert make_cfg(tmp_path, [f"task={task}"], arch="encoder_only").data._target_.endswith(data)


def test_classification_label_smoothing_by_hand():
    """task.label_smoothing=eps: the training loss is (1 - eps) * NLL + eps * mean over classes of -log p per
    example (Szegedy et al. 2016), averaged over the batch; 0 is plain cross-entropy; eps outside [0, 1) or not
    a number is refused, by translation too."""
    model = dict(vocab_size=20, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, num_classes=3)
    batch = {
        "ids": torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]]),
        "key_padding_mask": torch.tensor([[False] * 4, [False] * 3 + [True]]),
        "labels": torch.tensor([2, 0]),
    }
    plain = Classification("encoder_only", model, {}, {"lr": 1e-3}, {"warmup_steps": 1})
    smooth = Classification("encoder_only", model, {}, {"lr": 1e-3}, {"warmup_steps": 1}, label_smoothing=0.2)
    smooth.load_state_dict(plain.state_dict())
    logp = plain(batch).float().log_softmax(-1)
    nll = -logp[torch.arange(2), batch["labels"]]
    assert torch.allclose(plain.training_loss(batch), nll.mean(), atol=1e-6)
    assert torch.allclose(smooth.training_loss(batch), (0.8 * nll - 0.2 * logp.mean(-1)).mean(), atol=1e-6)
    for bad in (1.0, -0.1, "abc"):
        with pytest.raises(ValueError, match=rf"task.label_smoothing={bad!r} must be a number in \[0, 1\)"):
            Classification("encoder_only", model, {}, {"lr": 1e-3}, {"warmup_steps": 1}, label_smoothing=bad)
    tok = SubwordTokenizer(train_bpe(["ein hund", "a dog"], 30)).state_dict()
    with pytest.raises(ValueError, match=r"task.label_smoothing=1.0 must be a number in \[0, 1\); 0.1 is the"):
        Translation("encoder_decoder", model, {"src": tok, "tgt": tok}, {"lr": 1e-3}, {}, label_smoothing=1.0)


def test_testing_a_checkpoint_keeps_the_runs_training_cost():
    """The test of the best checkpoint after fit loads that checkpoint into the fitted task: results.json's
    cost must stay the whole run's (the budget that was spent), not the cost up to that checkpoint; resuming
    a fit continues from the checkpoint's cost."""
    from types import SimpleNamespace

    from lightning.pytorch.trainer.states import TrainerFn

    model = dict(vocab_size=20, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, num_classes=2)
    run_cost, best_cost = {"flops": 9e9, "tokens": 900, "seconds": 85.0}, {"flops": 4e9, "tokens": 400, "seconds": 38.0}
    for fn, expected in ((TrainerFn.TESTING, run_cost), (TrainerFn.FITTING, best_cost)):
        task = Classification("encoder_only", model, {}, {"lr": 1e-3}, {"warmup_steps": 1})
        task.cost.update(run_cost)
        task._trainer = SimpleNamespace(state=SimpleNamespace(fn=fn))
        task.on_load_checkpoint({"zoo_cost": dict(best_cost)})
        assert task.cost == expected, fn


@pytest.mark.parametrize("arch", ["encoder_only", "decoder_only", "encoder_decoder"])
@pytest.mark.e2e
def test_classification_run(tmp_path, arch):
    """A short SST-2 run per architecture; the reported test accuracy equals an independent evaluation
    of the best checkpoint."""
    over = SMALL + [
        "data.limit=320",
        "data.vocab_size=300",
        "data.batch_size=32",
        "model.max_len=128",
    ]  # 10 steps an epoch
    if arch != "encoder_only":
        over = ["task=classification", "data=sst2"] + over
    cfg = make_cfg(tmp_path, over, arch=arch)
    run(cfg)
    results = json.loads((tmp_path / "results.json").read_text())
    acc = results["final"]["test/acc"]
    ckpt = torch.load(results["best_checkpoint"], weights_only=True)
    model = build_model(arch, ModelConfig(**ckpt["hyper_parameters"]["model"])).eval()
    model.load_state_dict({k[6:]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")})
    from hydra.utils import instantiate

    dm = instantiate(cfg.data)
    dm.setup()
    right = n = 0
    with torch.no_grad():
        for batch in dm.test_dataloader():
            pred = model.classify(batch["ids"], batch["key_padding_mask"]).argmax(-1)
            right += int((pred == batch["labels"]).sum())
            n += len(pred)
    assert n == 320  # data.limit=320: the first 320 sentences of the test file too
    assert abs(acc - right / n) < 1e-6
    assert 0 <= results["final"]["test/f1"] <= 1
    # FLOPs per token of classify() (no LM head) at the training examples' mean length
    assert results["flops_per_token"] == classify_flops_per_token(model, dm.model_info()["seq_len"])


@pytest.mark.parametrize(
    "arch,mask",
    [
        ("encoder_decoder", "causal"),
        ("decoder_only", "causal"),
        ("decoder_only", "prefix"),
        ("encoder_only", "bidirectional"),
    ],
)
@pytest.mark.e2e
def test_translation_run(tmp_path, arch, mask):
    """A short run per architecture, each with its default objective (encoder_only: encoder_ar, autoregressive)
    and the same loss, greedy and beam metrics; the cost it reports is its own (encoder_ar: no cache)."""
    over = SMALL + [
        "data.limit=300",
        "data.vocab_size=300",
        "data.max_tokens=1024",
        f"model.mask={mask}",
        "task.beam_size=2",
        "trainer.limit_val_batches=2",
        "trainer.limit_test_batches=2",
        "trainer.val_check_interval=6",
    ]
    if arch != "encoder_decoder":
        over = ["task=translation", "data=multi30k"] + over
    run(make_cfg(tmp_path, over, arch=arch))
    results = json.loads((tmp_path / "results.json").read_text())
    f = results["final"]
    assert results["objective"] == ("encoder_ar" if arch == "encoder_only" else "translation")
    for key in ("val/loss", "val/bleu", "val/chrf", "test/bleu", "test/chrf", "test/bleu_beam", "test/chrf_beam"):
        assert key in f
    assert "val/length_acc" not in f
    if arch == "encoder_only":  # a generated token re-reads source + target prefix: > 1 token's forward
        assert results["cost"]["inference_flops_per_token"] > 5 * results["flops_per_token"]
    assert 0 <= f["test/bleu"] <= 100 and 0 <= f["test/chrf"] <= 100
    assert len(list(tmp_path.glob("tokenizer.joint.*.json"))) == 1  # the joint BPE, saved in the run dir


@pytest.mark.e2e
def test_translation_run_encoder_only_nat(tmp_path):
    """Non-autoregressive translation (CMLM + mask-predict) through the main job: the same BLEU / chrF keys as
    the other archs, plus val/length_acc; the one-sequence length check uses 2 x data.max_len."""
    over = (
        ["task=translation", "data=multi30k", "task.objective=cmlm_mask_predict"]
        + SMALL
        + [
            "data.limit=300",
            "data.vocab_size=300",
            "data.max_tokens=1024",
            "task.beam_size=2",
            "task.nat_iterations=2",
            "trainer.limit_val_batches=2",
            "trainer.limit_test_batches=2",
            "trainer.val_check_interval=6",
        ]
    )
    with pytest.raises(ConfigError, match="2 x data.max_len"):
        run(make_cfg(tmp_path, over + ["model.max_len=200"], arch="encoder_only"))  # data.max_len 128
    run(make_cfg(tmp_path, over, arch="encoder_only"))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["objective"] == "cmlm_mask_predict"
    f = results["final"]
    for key in (
        "val/loss",
        "val/length_acc",
        "val/bleu",
        "val/chrf",
        "test/loss",
        "test/length_acc",
        "test/bleu",
        "test/chrf",
        "test/bleu_beam",
        "test/chrf_beam",
    ):
        assert key in f, key
    assert 0 <= f["test/bleu"] <= 100 and 0 <= f["val/length_acc"] <= 1


def lm_task(arch, objective=None, **model):
    from zoo.tasks.lm import LanguageModeling

    cfg = dict(vocab_size=65, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=64, **model)
    return LanguageModeling(
        arch,
        cfg,
        {"chars": "".join(chr(32 + i) for i in range(65))},
        {"lr": 1e-3},
        {"warmup_steps": 1},
        objective=objective,
    )


def test_bert_masking_proportions():
    """15% chosen; of those 80% <mask>, 10% random, 10% unchanged (Devlin et al. 2019); others untouched."""
    task = lm_task("encoder_only", "masked_lm")
    assert task.mask_id == 65 and task.model.cfg.vocab_size == 66
    x = torch.randint(0, 65, (200, 500), generator=torch.Generator().manual_seed(0))
    inputs, chosen = task.objective_impl.mask_tokens(x, torch.Generator().manual_seed(1))
    n = chosen.sum().item()
    assert abs(n / x.numel() - 0.15) < 0.005
    assert torch.equal(inputs[~chosen], x[~chosen])
    masked = (inputs[chosen] == 65).float().mean().item()
    changed = ((inputs[chosen] != 65) & (inputs[chosen] != x[chosen])).float().mean().item()
    assert abs(masked - 0.8) < 0.01
    assert abs(changed - 0.1 * 64 / 65) < 0.01  # a random character equals the original 1 time in 65


def test_lm_objectives_by_hand():
    x = torch.randint(0, 65, (3, 10))
    y = torch.randint(0, 65, (3, 10))
    dec = lm_task("decoder_only").eval()
    out = dec.losses((x, y))
    nll = F.cross_entropy(dec.model(x).transpose(1, 2), y, reduction="none")  # (B, T)
    assert abs(out["loss"].item() - nll.mean().item()) < 1e-6
    assert abs(out["cont"].item() - nll[:, 4:].mean().item()) < 1e-6  # predicts y[:, 4:] = x's chars 5..10
    encdec = lm_task("encoder_decoder").eval()
    out = encdec.losses((x, y))
    logits = encdec.model(x[:, :5], x[:, 4:])  # source: first half; decoder starts at the last source char
    assert logits.shape == (3, 6, 65)
    assert abs(out["loss"].item() - F.cross_entropy(logits.transpose(1, 2), y[:, 4:]).item()) < 1e-6


def test_causal_continuation_trains_on_the_second_half_only():
    """causal_continuation: causal_lm's forward, the loss on y[:, T/2-1:] alone; the first half's targets
    change nothing."""
    torch.manual_seed(0)
    x, y = torch.randint(0, 65, (3, 10)), torch.randint(0, 65, (3, 10))
    task = lm_task("decoder_only", objective="causal_continuation").eval()
    assert task.objective == "causal_continuation"
    nll = F.cross_entropy(task.model(x).transpose(1, 2), y, reduction="none")  # (B, T)
    out = task.losses((x, y))
    assert out["loss"].item() == pytest.approx(nll[:, 4:].mean().item(), abs=1e-6)
    assert out["cont"].item() == pytest.approx(nll[:, 4:].mean().item(), abs=1e-6)
    assert torch.allclose(out["cont_windows"], nll[:, 4:].mean(1), atol=1e-6)
    y2 = y.clone()
    y2[:, :4] = (y2[:, :4] + 1) % 65  # other targets in the first half
    assert task.training_loss((x, y2)).item() == pytest.approx(task.training_loss((x, y)).item(), abs=1e-7)


@pytest.mark.parametrize(
    "arch,objective,metric",
    [
        ("encoder_only", "entp", "val/cont_loss"),
        ("encoder_only", "masked_lm", "val/mlm_acc"),
        ("encoder_decoder", "prefix_continuation", "val/cont_loss"),
        ("decoder_only", "causal_lm", "val/cont_loss"),
        ("decoder_only", "causal_continuation", "val/cont_loss"),
    ],
)
@pytest.mark.e2e
def test_lm_run_each_arch(tmp_path, arch, objective, metric):
    """A short run per objective (masked_lm by task.objective, the others by default). The next-token ones
    record the best validation's per-window continuation losses (examples.json; all windows hold T - T/2 + 1 =
    17 targets); where val/loss is the continuation loss (entp, prefix_continuation) their mean is the best
    val/cont_loss."""
    from zoo_run import TINY

    over = ([] if arch == "decoder_only" else ["task=lm", "data=tiny_shakespeare"]) + TINY + ["logger=csv"]
    over += [f"task.objective={objective}"] if objective in ("masked_lm", "causal_continuation") else []
    run(make_cfg(tmp_path, over, arch=arch))
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["objective"] == objective
    assert metric in results["final"] and results["final"]["val/loss"] < 4.8
    if objective == "masked_lm":
        assert results["examples"] is None
        return
    ex = json.loads((tmp_path / results["examples"]).read_text())
    assert len(ex["loss"]) == 16 and set(ex["tokens"]) == {17}  # data.val_windows=16, block_size 32
    if objective != "causal_lm":  # the monitor (val/loss) is the continuation loss
        assert sum(ex["loss"]) / 16 == pytest.approx(results["best"]["val/cont_loss"], abs=1e-5)
        assert results["final"]["val/loss"] == pytest.approx(results["final"]["val/cont_loss"], abs=1e-6)


Z_LOSS = 0.01  # large enough to move the loss by ~0.1 nats at an untrained model's log Z ~ 4


def z_loss_pair(build):
    """(build(z_loss=0), build(z_loss=Z_LOSS)) with the same weights."""
    torch.manual_seed(0)
    off, on = build(0.0), build(Z_LOSS)
    on.load_state_dict(off.state_dict())
    return off, on


def test_z_loss_adds_palms_term_to_the_training_loss_only():
    """task.z_loss adds PaLM's z_loss * log(Z)^2 (Chowdhery et al. 2022, sec. 5) to the training loss, averaged
    over the tokens the cross-entropy averages (the causal LM's every position, masked_lm's masked positions,
    translation's real target tokens, padding excluded), checked against full logits; in evaluation (val / test
    loss) the loss is the z_loss=0 task's exactly."""
    from zoo.tasks.lm import LanguageModeling

    chars = {"chars": "".join(chr(32 + i) for i in range(65))}
    cfg = dict(vocab_size=65, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=64)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 65, (3, 10), generator=g), torch.randint(0, 65, (3, 10), generator=g)

    def lm(arch, objective=None):
        opt, sched = {"lr": 1e-3}, {"warmup_steps": 1}
        return lambda z: LanguageModeling(arch, cfg, chars, opt, sched, objective=objective, z_loss=z)

    off, on = z_loss_pair(lm("decoder_only"))
    logits = off.model(x).float()
    expected = F.cross_entropy(logits.flatten(0, 1), y.flatten()) + Z_LOSS * logits.logsumexp(-1).square().mean()
    assert abs(on.training_loss((x, y)).item() - expected.item()) < 1e-6
    assert on.training_loss((x, y)).item() - off.training_loss((x, y)).item() > 0.05
    assert torch.equal(on.eval().losses((x, y))["loss"], off.eval().losses((x, y))["loss"])

    off, on = z_loss_pair(lm("encoder_only", "masked_lm"))
    inputs, chosen = off.objective_impl.mask_tokens(x, torch.Generator().manual_seed(1))
    logits = off.model.lm_head(off.model.encode(inputs)[chosen]).float()
    expected = F.cross_entropy(logits, x[chosen]) + Z_LOSS * logits.logsumexp(-1).square().mean()
    got = on.losses((x, y), torch.Generator().manual_seed(1))["loss"]
    assert abs(got.item() - expected.item()) < 1e-6
    on.eval(), off.eval()
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(on.losses((x, y), g1)["loss"], off.losses((x, y), g2)["loss"])

    tok = SubwordTokenizer(train_bpe(["ein hund läuft", "a dog runs"], 30)).state_dict()
    model = dict(vocab_size=20, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0)
    off, on = z_loss_pair(
        lambda z: Translation(
            "encoder_decoder", model, {"src": tok, "tgt": tok}, {"lr": 1e-3}, {"warmup_steps": 1}, z_loss=z
        )
    )
    src, tgt_in, tgt_out = (
        torch.tensor(t) for t in ([[5, 6, 2], [7, 2, 0]], [[1, 8, 9], [1, 10, 0]], [[8, 9, 2], [10, 2, 0]])
    )
    batch = {"src": src, "src_key_padding_mask": src == 0, "tgt_in": tgt_in, "tgt_out": tgt_out}
    batch["tgt_key_padding_mask"] = tgt_out == 0
    logits = off.model(src, tgt_in, src == 0, tgt_out == 0).float()[tgt_out != 0]  # (5 real tokens, V)
    ce = F.cross_entropy(logits, tgt_out[tgt_out != 0], label_smoothing=0.1)
    expected = ce + Z_LOSS * logits.logsumexp(-1).square().mean()
    assert abs(on.training_loss(batch).item() - expected.item()) < 1e-6
    assert torch.equal(on.eval().loss(batch), off.eval().loss(batch))


def test_z_loss_must_be_a_non_negative_number(tmp_path):
    """A bad task.z_loss is refused before any data is read (ConfigError), and by the task itself."""
    from zoo.run.checks.config import check_config
    from zoo.tasks.lm import LanguageModeling

    for bad in ("-0.1", "abc", "true"):
        cfg = make_cfg(tmp_path, [f"task.z_loss={bad}"], arch="decoder_only")
        with pytest.raises(ConfigError, match=r"task\.z_loss=.* must be a non-negative number.*0 = off"):
            check_config(cfg)
    cfg = dict(vocab_size=65, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=64)
    with pytest.raises(ValueError, match=r"task\.z_loss=-1 must be a non-negative number"):
        LanguageModeling("decoder_only", cfg, {"chars": "ab"}, {"lr": 1e-3}, {"warmup_steps": 1}, z_loss=-1)
    check_config(make_cfg(tmp_path, ["task.z_loss=1e-4"], arch="encoder_decoder"))  # translation takes it too
