"""Runs that export (docs/interop.md): each family's documented override set, composed as `python -m zoo`
composes it, builds a model that to_hf writes as that family and transformers loads; a run that does not
export is refused once, naming every blocking option with its override."""

import re

import pytest

tf = pytest.importorskip("transformers")

from zoo_run import REPO, TINY_MODEL, make_cfg  # noqa: E402

from zoo.interop import hf as zhf  # noqa: E402
from zoo.interop.blockers import Unsupported  # noqa: E402
from zoo.interop.families.registry import HF_CLASSES  # noqa: E402
from zoo.model import ModelConfig, build_model  # noqa: E402
from zoo.run.checks.config import check_config  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

FAMILY = {"GPT-2": "gpt2", "BERT": "bert", "Marian": "marian", "BART": "bart", "T5": "t5"}
AUTO = {"gpt2": "AutoModelForCausalLM", "bert": "AutoModelForMaskedLM"}


def documented_runs() -> dict[str, list[str]]:
    """{family: the overrides of its `python -m zoo ... # Family` line} in docs/interop.md's "Runs that export"."""
    text = (REPO / "docs" / "interop.md").read_text()
    section = text.split("## Runs that export", 1)[1].split("\n## ", 1)[0]
    lines = re.findall(r"^python -m zoo (.+?)\s+# (\S+)$", section, re.M)
    return {FAMILY[name]: overrides.split() for overrides, name in lines}


RUNS = documented_runs()


def run_model(tmp_path, overrides: list[str], vocab: int = 60):
    """The model `python -m zoo <overrides>` builds (its plan, on data of `vocab` tokens with zoo's special ids 0,
    1, 2, and 2 classes for a classification task), at TINY_MODEL's size: composed and checked as `python -m zoo`
    does, nothing read or trained."""
    arch = next(o for o in overrides if o.startswith("+arch=")).removeprefix("+arch=")
    cfg = make_cfg(tmp_path, [o for o in overrides if not o.startswith("+arch=")] + TINY_MODEL, arch=arch)
    plan = check_config(cfg)  # what `python -m zoo` checks before reading data; the run's plan
    info = {"vocab_size": vocab, "src_vocab_size": vocab, "pad_id": 0, "bos_id": 1, "eos_id": 2}
    plan = plan.with_data(cfg, {**info, "num_classes": 2} if plan.task == "classification" else info)
    return build_model(plan.arch, ModelConfig(**plan.model))


def test_every_family_has_a_documented_run():
    assert sorted(RUNS) == sorted(FAMILY.values())
    assert all(run[0].startswith("+arch=") for run in RUNS.values())


@pytest.mark.parametrize("family", sorted(FAMILY.values()))
def test_the_documented_run_exports(tmp_path, family):
    """The run's model exports as `family` with no --family (zoo.convert to-hf's default) and transformers loads
    it as that family's class."""
    model = run_model(tmp_path, RUNS[family])
    assert zhf.hf_config(model)["model_type"] == family
    hf = getattr(tf, AUTO.get(family, "AutoModelForSeq2SeqLM")).from_pretrained(zhf.to_hf(model, tmp_path / "hf"))
    assert type(hf).__name__ == HF_CLASSES[family]


# the README's default run of each family's architecture, and the options that keep it from that family: what
# the family needs (families.py's config_to_hf) against conf/model/tiny.yaml and the task's model settings
DEFAULT_BLOCKERS = {
    "gpt2": ("decoder_only", ["norm_first", "position", "scale_embeddings", "final_norm"]),
    "bert": (
        "encoder_only",
        [
            "num_classes",
            "position",
            "scale_embeddings",
            "embed_norm",
            "lm_head_transform",
            "lm_head_bias",
            "type_vocab_size",
        ],
    ),
    "marian": ("encoder_decoder", ["sinusoidal_layout"]),
    "bart": ("encoder_decoder", ["position", "position_offset", "embed_norm", "share_tokens"]),
    "t5": (
        "encoder_decoder",
        ["norm", "norm_first", "bias", "position", "attn_scale", "scale_embeddings", "final_norm", "share_embeddings"],
    ),
}


@pytest.mark.parametrize("family", sorted(DEFAULT_BLOCKERS))
def test_a_default_run_is_refused_once_naming_every_blocker_and_its_fix(tmp_path, family):
    """One refusal names every blocking option of the default run, and the overrides it gives, all applied,
    make the run export."""
    arch, blockers = DEFAULT_BLOCKERS[family]
    with pytest.raises(Unsupported) as e:
        zhf.to_hf(run_model(tmp_path, [f"+arch={arch}"]), tmp_path / "refused", family=family)
    message = str(e.value)
    assert message.startswith(f"{len(blockers)} option")
    assert re.findall(r"model\.(\w+)=\S+ \(", message.split("; train with")[0]) == blockers
    fixes = re.search(r"; train with (.+?) \(docs/interop\.md", message).group(1).split()
    assert len(fixes) == len(blockers)
    model = run_model(tmp_path, [f"+arch={arch}", *fixes])
    hf = getattr(tf, AUTO.get(family, "AutoModelForSeq2SeqLM")).from_pretrained(
        zhf.to_hf(model, tmp_path / "hf", family=family)
    )
    assert type(hf).__name__ == HF_CLASSES[family]
