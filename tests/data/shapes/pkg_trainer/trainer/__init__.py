"""A training package, run as ``python -m trainer.train`` from the folder above it."""
