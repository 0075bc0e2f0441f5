"""bench.models.local."""
