"""Benchmarks and fault drills: ``python -m bench <scenario> [--quick]`` (see bench/RESULTS.md)."""
