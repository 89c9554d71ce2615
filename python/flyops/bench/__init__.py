"""Benchmarks of flyops against stock PyTorch: `python -m flyops.bench --op rms_norm`."""
