"""Datasets for zoo: a checksum-verifying file resolver and Lightning data modules."""
