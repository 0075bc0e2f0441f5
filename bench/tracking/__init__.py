"""bench.tracking."""
