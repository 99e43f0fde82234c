"""zoo.tasks.objectives: one module per training objective. An objective owns the model class it needs (ARCH),
the model fields it adds (model_fields), how a batch becomes inputs and targets, its cost, and how it
decodes; the task holds the loop (logging, metrics, examples). Adding one: a module with an Objective
subclass, listed in OBJECTIVES below (docs/architectures.md walks through it)."""

from zoo.tasks.objectives.base import Objective
from zoo.tasks.objectives.causal_continuation import CausalContinuation
from zoo.tasks.objectives.causal_lm import CausalLM
from zoo.tasks.objectives.classify import Classify
from zoo.tasks.objectives.cmlm import CMLM
from zoo.tasks.objectives.encoder_ar import EncoderAR
from zoo.tasks.objectives.entp import ENTP
from zoo.tasks.objectives.joined import JoinedTranslation
from zoo.tasks.objectives.masked_lm import MaskedLM
from zoo.tasks.objectives.prefix_continuation import PrefixContinuation
from zoo.tasks.objectives.prefix_lm import PrefixLM
from zoo.tasks.objectives.seq2seq import Seq2Seq

# per task kind (a datamodule's BATCH), the objectives in the order an architecture's default is chosen
OBJECTIVES = {
    "lm": (CausalLM, PrefixLM, ENTP, MaskedLM, PrefixContinuation, CausalContinuation),
    "translation": (Seq2Seq, JoinedTranslation, EncoderAR, CMLM),
    "classification": (Classify,),
}


def of_arch(task: str, arch: str) -> tuple:
    """The objective classes task `task` trains +arch=`arch` with, its default first."""
    return tuple(o for o in OBJECTIVES.get(task, ()) if o.ARCH in (arch, None))


def _admits(objective: type[Objective], mask) -> bool:
    return objective.MASKS is None or mask in objective.MASKS


def objective_class(task: str, arch: str, name: str | None = None, mask: str | None = None) -> type[Objective]:
    """The objective that trains `arch` in `task`: `name` (task.objective), or None for the arch's default,
    the first of of_arch(task, arch) whose MASKS admit model.mask (`mask`; so decoder_only with
    model.mask=prefix defaults to prefix_lm), else the first. Raises ValueError for an objective the arch
    does not train, naming those it does, or one whose mask another of the arch's objectives owns."""
    mine = of_arch(task, arch)
    if not mine:
        raise ValueError(f"task={task} has no objective for +arch={arch}")
    if name is None:
        return next((o for o in mine if _admits(o, mask)), mine[0])
    chosen = [o for o in mine if o.NAME == name]
    if not chosen:
        owner = [o.ARCH for o in OBJECTIVES.get(task, ()) if o.NAME == name]
        why = f"it is +arch={owner[0]}'s" if owner else "it is unknown"
        raise ValueError(
            f"task.objective={name} cannot train +arch={arch} in task={task} ({why}); +arch={arch} "
            f"trains {', '.join(o.NAME for o in mine)} (task.objective=null: its default)"
        )
    other = [o for o in mine if o is not chosen[0] and _admits(o, mask)]
    if not _admits(chosen[0], mask) and other:
        raise ValueError(
            f"task.objective={name} needs model.mask={'|'.join(str(m) for m in chosen[0].MASKS if m)} "
            f"(model.mask={mask} trains task.objective={other[0].NAME})"
        )
    return chosen[0]


def check_monitor(objective: type[Objective], monitor: str) -> None:
    """Raise ValueError unless `objective` logs the validation metric `monitor` (task.monitor), naming what it
    logs and which of its task's objectives log `monitor`."""
    if monitor in objective.METRICS:
        return
    owners = [o.NAME for o in OBJECTIVES.get(objective.TASK, ()) if monitor in o.METRICS]
    raise ValueError(
        f"task.monitor={monitor} is not logged by task.objective={objective.NAME}; it logs "
        f"{', '.join(objective.METRICS)}"
        + (f" ({monitor} is logged by task.objective={' / '.join(owners)} only)" if owners else "")
    )


def arch_rules(task: str, arch: str) -> dict:
    """What zoo.run.checks checks before a model is built, over every objective of (task, arch):
    "metrics" (what task.monitor may name), "masks" (allowed model.mask values; None: any), "joins" (a source
    and target read as one sequence), "one_vocabulary" (that sequence needs data.joint_vocab=true),
    "fixed_ids" (zoo.data.bpe's fixed special ids written into the inputs)."""
    mine = of_arch(task, arch)
    metrics = tuple(dict.fromkeys(m for o in mine for m in o.METRICS))
    masks = None if any(o.MASKS is None for o in mine) else tuple(dict.fromkeys(m for o in mine for m in o.MASKS))
    return {
        "metrics": metrics,
        "masks": masks,
        "joins": any(o.SOURCE == "joined" for o in mine),
        "one_vocabulary": any(o.ONE_VOCABULARY for o in mine),
        "fixed_ids": any(o.FIXED_SPECIAL_IDS for o in mine),
    }


__all__ = [
    "OBJECTIVES",
    "CMLM",
    "ENTP",
    "CausalLM",
    "Classify",
    "EncoderAR",
    "JoinedTranslation",
    "MaskedLM",
    "Objective",
    "PrefixContinuation",
    "PrefixLM",
    "Seq2Seq",
    "arch_rules",
    "check_monitor",
    "objective_class",
    "of_arch",
]
