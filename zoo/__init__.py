"""zoo: a Transformer architecture zoo."""
