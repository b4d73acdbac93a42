"""Verified, version-gated answers about vLLM tiered KV caching."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vllm-caching-mcp")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0.0.0+unknown"
