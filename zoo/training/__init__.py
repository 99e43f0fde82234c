"""zoo.training: the Lightning pieces tasks share: callbacks, checkpoint writes, strategies, optimizer, schedules."""
