"""zoo.run.checks: the checks of a composed config before any data is read, one module per thing checked."""
