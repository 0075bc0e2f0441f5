"""bench.core."""
