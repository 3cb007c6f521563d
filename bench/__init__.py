"""Benchmarks and fault drills: ``python bench/<name>.py [--quick]`` (see bench/RESULTS.md)."""
