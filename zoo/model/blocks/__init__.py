"""zoo.model.blocks: the boxes of the Transformer diagram, from attention to the heads, and the stacks."""
