"""A run is resolved once (zoo.run.plan.RunPlan): the objective is chosen in one place, and every setting is
obeyed or refused. model.prefix_len is obeyed by prefix_lm (bidirectional over the first P tokens, trained on
the tokens after them) and refused, naming what decides the prefix, where an objective decides it."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from zoo_run import TINY, TINY_MODEL, make_cfg

from zoo.errors import ConfigError
from zoo.run.checks.config import check_config
from zoo.run.train import run
from zoo.tasks.lm import LanguageModeling

CHARS = {"chars": "".join(chr(32 + i) for i in range(65))}


def prefix_task(prefix_len: int) -> LanguageModeling:
    model = dict(vocab_size=65, d_model=16, n_heads=2, d_ff=32, n_layers=1, dropout=0.0, max_len=64)
    model.update(mask="prefix", prefix_len=prefix_len)
    return LanguageModeling("decoder_only", model, CHARS, {"lr": 1e-3}, {"warmup_steps": 1}).eval()


def test_prefix_lm_obeys_model_prefix_len():
    """prefix_len=5 on 12-token windows: bidirectional over x[:, :5] (changing x[:, 3] changes the logits at
    position 1), causal after (changing x[:, 8] leaves positions < 8 alone); val/loss is the cross-entropy of
    y[:, 4:] and val/cont_loss that of the continuation y[:, 5:], under that mask. prefix_len=0 keeps the
    default, half the window (6): its loss is another number."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(0, 65, (3, 12), generator=g), torch.randint(0, 65, (3, 12), generator=g)
    task = prefix_task(5)
    with torch.no_grad():
        out = task.losses((x, y))
        logits = task.model(x, prefix_len=5)  # (B, T, V)
        x3, x8 = x.clone(), x.clone()
        x3[:, 3], x8[:, 8] = (x[:, 3] + 1) % 65, (x[:, 8] + 1) % 65
        assert not torch.allclose(task.model(x3, prefix_len=5)[:, 1], logits[:, 1])  # sees a later prefix token
        assert torch.allclose(task.model(x8, prefix_len=5)[:, :8], logits[:, :8])  # never a later other token
    nll = F.cross_entropy(logits.transpose(1, 2), y, reduction="none")  # (B, T)
    assert out["loss"].item() == pytest.approx(nll[:, 4:].mean().item(), abs=1e-6)
    assert out["cont"].item() == pytest.approx(nll[:, 5:].mean().item(), abs=1e-6)
    assert torch.allclose(out["cont_windows"], nll[:, 5:].mean(1), atol=1e-6)
    with torch.no_grad():
        default = prefix_task(0).losses((x, y))["loss"].item()
    assert default != pytest.approx(out["loss"].item(), abs=1e-4)


@pytest.mark.parametrize(
    "overrides, arch, message",
    [
        (["task=lm", "model.mask=prefix", "model.prefix_len=17"], "decoder_only", r"longer than half the window"),
        (["model.prefix_len=5"], "prefix_lm", r"prefix is each pair's source"),  # translation
        (["task=lm", "model.prefix_len=5"], "decoder_only", r"not read it \(model\.mask=prefix does\)"),
        (
            ["task=classification", "data=sst2", "model.mask=prefix", "model.prefix_len=5"],
            "decoder_only",
            r"whole text",
        ),
    ],
)
def test_a_prefix_len_an_objective_would_not_obey_is_refused(tmp_path, overrides, arch, message):
    """Before any data is read (check_config): a prefix longer than half the window (data.block_size=32 in
    TINY), translation's prefix (the source), a prefix_len without the prefix mask, classification's prefix
    (the whole text)."""
    cfg = make_cfg(tmp_path, [*(TINY if "task=lm" in overrides else TINY_MODEL), *overrides], arch=arch)
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)


def test_a_prefix_len_prefix_lm_obeys_is_planned(tmp_path):
    cfg = make_cfg(tmp_path, [*TINY, "task=lm", "model.mask=prefix", "model.prefix_len=5"])
    plan = check_config(cfg)
    assert plan.task == "lm" and plan.arch == "decoder_only" and plan.objective.NAME == "prefix_lm"


@pytest.mark.e2e
@pytest.mark.usefixtures("one_thread")
def test_a_run_chooses_its_objective_once(tmp_path, monkeypatch):
    """Count the calls of objective_class that choose (task.objective unset: the arch's default) in a 1-step
    run, at every module that imports it: one (the plan's); the task looks up the name the plan recorded."""
    from zoo.tasks.objectives import objective_class

    choices = []

    def counting(task, arch, name=None, mask=None):
        if name is None:
            choices.append((task, arch, mask))
        return objective_class(task, arch, name, mask)

    for module in ("zoo.run.plan", "zoo.tasks.base", "zoo.run.checks.task", "zoo.run.model_config"):
        monkeypatch.setattr(f"{module}.objective_class", counting, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run(make_cfg(tmp_path, [*TINY, "trainer.max_steps=1", "task.sample=null", "logger=csv"]))
    assert choices == [("lm", "decoder_only", None)]


@pytest.mark.parametrize(
    "arch, mask, prefix_len, message",
    [
        ("decoder_only", "prefix", 5, r"not read by decoder_only classification: with model\.mask=prefix the whole"),
        ("decoder_only", "prefix", 0, None),  # prefix_lm classification: the whole text is the prefix
        ("decoder_only", None, 5, r"read only with model\.mask=prefix \(this run: model\.mask=None\)"),
        ("decoder_only", None, 0, None),  # plain decoder_only classification
        ("encoder_only", "prefix", 5, None),
        ("encoder_decoder", "prefix", 5, None),
        (None, "prefix", 5, None),  # no arch named: the base rule alone
    ],
)
def test_classification_refuses_a_prefix_len_only_where_classify_ignores_it(arch, mask, prefix_len, message):
    """Classify.check_model, as before it asked the model class: decoder_only classification (prefix_lm: mask=prefix)
    refuses model.prefix_len, since DecoderOnly.classify makes each row's whole text the prefix; without the prefix
    mask the base rule refuses it; the other architectures keep the base rule."""
    from zoo.tasks.objectives import Classify

    model = {"mask": mask, "prefix_len": prefix_len}
    if message is None:
        Classify.check_model(model, None, arch)
    else:
        with pytest.raises(ValueError, match=message):
            Classify.check_model(model, None, arch)


def test_classify_text_is_prefix_says_which_classify_ignores_prefix_len():
    """The flag Classify reads is what the models do under mask=prefix (num_classes=2, the same weights):
    DecoderOnly.classify gives the same logits for model.prefix_len 1 and 3 (each row's whole text is its
    prefix), EncoderOnly.classify other logits (it reads model.prefix_len)."""
    from zoo.model import ARCHITECTURES, ModelConfig

    idx = torch.randint(3, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    base = dict(vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0, max_len=16, num_classes=2)
    for arch in ("decoder_only", "encoder_only"):
        logits = []
        for prefix_len in (1, 3):
            torch.manual_seed(0)
            model = ARCHITECTURES[arch](ModelConfig(**base, mask="prefix", prefix_len=prefix_len)).eval()
            with torch.no_grad():
                logits.append(model.classify(idx))
        same = torch.allclose(logits[0], logits[1], atol=1e-6)
        assert same == ARCHITECTURES[arch].CLASSIFY_TEXT_IS_PREFIX, arch
    assert (
        ARCHITECTURES["decoder_only"].CLASSIFY_TEXT_IS_PREFIX
        and not ARCHITECTURES["encoder_only"].CLASSIFY_TEXT_IS_PREFIX
    )
