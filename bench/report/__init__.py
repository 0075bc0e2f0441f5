"""bench.report."""
