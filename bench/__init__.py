"""Benchmarks of the collection itself. Run `python -m bench --help`; results and the
commands that made them are in BENCHMARKS.md. Not timed tests: numbers are reported, not asserted."""
