"""zoo.trace: one sentence through a zoo Transformer, stage by stage (`python -m zoo.trace`)."""
