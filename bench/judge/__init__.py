"""bench.judge."""
