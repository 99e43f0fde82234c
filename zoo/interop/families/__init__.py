"""zoo.interop.families: the Hugging Face families zoo converts (registry), their shared maps, one module each."""
