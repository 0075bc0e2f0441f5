"""bench.config."""
