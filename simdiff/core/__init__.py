"""The derivative engine: problems, the derivative API, caches, compile policy and identity."""
