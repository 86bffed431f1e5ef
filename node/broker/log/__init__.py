"""The replicated log's storage: segments, indexes, checkpoints, one Log per partition."""
