"""zoo.training: the Lightning pieces every task shares: callbacks, atomic checkpoint writes, distributed
strategies, the optimizer and its learning-rate schedules."""
