"""Verified, version-gated answers about vLLM tiered KV caching."""

# The one place the version is written (pyproject.toml reads it from here): a literal, because asking
# importlib.metadata costs ~50 ms at every start-up.
__version__ = "0.1.0"
