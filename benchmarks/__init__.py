"""Benchmarks of the grader: ``python -m benchmarks.run`` (``make bench``). See benchmarks/README.md."""
