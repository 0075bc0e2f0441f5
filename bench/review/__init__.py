"""bench.review."""
