"""A run resolved once. RunPlan.from_config reads the composed config and chooses, in one place, what trains:
the task kind (the task class's BATCH), the architecture and the objective (zoo.tasks.objectives.objective_class:
task.objective, or the arch's default for model.mask), which then checks the model fields it reads (its
check_model: e.g. model.prefix_len, obeyed by prefix_lm, refused where the objective decides the prefix).
with_data adds, once the data is read, the final ModelConfig fields (zoo.run.model_config.from_data: the
model group, the data's sizes and special ids, an init_from checkpoint's shape; then the objective's
model_fields) and the task arguments (the objective's name and its task_fields). build_task builds the task
from them; the task looks up the objective by the name the plan gives and chooses nothing."""

import inspect
from dataclasses import dataclass, field, replace

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from zoo.errors import ConfigError
from zoo.run.budget import unwrapped
from zoo.run.model_config import from_data, model_dict
from zoo.tasks.objectives import Objective, arch_rules, objective_class, of_arch


@dataclass(frozen=True)
class RunPlan:
    """What a run trains, resolved once (module docstring). task: the task kind (lm, translation,
    classification: the task class's BATCH); task_class: the LightningModule class of cfg.task; arch;
    objective: the objective class (None for a task of one's own, outside zoo.tasks.objectives); model: the final
    ModelConfig fields (None until with_data); task_args: what the objective adds to the task's arguments."""

    task: str | None
    task_class: type
    arch: str
    objective: type[Objective] | None
    model: dict | None = None
    task_args: dict = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: DictConfig) -> "RunPlan":
        """The plan of the composed config cfg, before any data is read: the objective chosen for (task kind,
        cfg.arch, task.objective, model.mask), which must admit model.mask and the model fields it reads.
        Raises ConfigError naming the key and the fix."""
        task_class = get_class(cfg.task._target_)
        kind = getattr(task_class, "BATCH", None)
        if not of_arch(kind, cfg.arch):  # a task of the user's own, without zoo's objectives
            return cls(kind, task_class, cfg.arch, None)
        mask = cfg.model.get("mask")
        try:
            rule = objective_class(kind, cfg.arch, cfg.task.get("objective"), mask)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if rule.MASKS is not None and mask not in rule.MASKS:
            allowed = arch_rules(kind, cfg.arch)["masks"]
            raise ConfigError(
                f"model.mask={mask} would let {cfg.arch} see the tokens it predicts in "
                f"task={task_class.__name__}; allowed: {', '.join(str(m) for m in allowed)}"
            )
        try:
            rule.check_model(model_dict(cfg), (cfg.get("data") or {}).get("block_size"), cfg.arch)
        except ValueError as e:  # a resolver's own message, not OmegaConf's wrapping of it (model.n_layers=${...})
            raise ConfigError(str(unwrapped(e) if isinstance(e, InterpolationResolutionError) else e)) from None
        return cls(kind, task_class, cfg.arch, rule)

    def with_data(self, cfg: DictConfig, info: dict, source=None, data_name: str = "the data") -> "RunPlan":
        """The plan with its final model fields and task arguments, given the data (`info`, the datamodule's
        model_info) and an init_from `source` (zoo.interop.init_from; None: fresh weights). data_name names
        the data in errors. Raises ConfigError for a model.num_classes the data does not have."""
        model = from_data(cfg, info, source, data_name)
        if self.objective is None:
            return replace(self, model=model)
        args = self.objective.task_fields(model)
        if "objective" in inspect.signature(self.task_class).parameters:
            args = {"objective": self.objective.NAME, **args}
        return replace(self, model=self.objective.model_fields(model), task_args=args)

    def build_task(self, cfg: DictConfig, info: dict):
        """The task of cfg.task built from the plan's final model fields and task arguments, and the data's
        tokenizer state (info["tokenizer"]). Raises ValueError before with_data."""
        if self.model is None:
            raise ValueError("RunPlan.build_task needs the final model fields: call with_data first")
        return instantiate(
            cfg.task, arch=self.arch, model=self.model, tokenizer=info["tokenizer"], **self.task_args, _convert_="all"
        )
