"""zoo.model.decoding: generation from a trained model (the token-by-token loop, sampling, beam search)."""
