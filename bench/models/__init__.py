"""bench.models."""
