"""zoo.tasks: one LightningModule per task (training code; the models stay in zoo.model)."""


def unavailable(name: str, **_):  # checked by zoo.train.check_config before any work
    """Placeholder target of tasks not built yet; raises a clear error before any work."""
    raise ValueError(f"task={name} is not available yet (tracked in issue 4); available: task=lm with "
                     f"+arch=decoder_only")
