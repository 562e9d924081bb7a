"""polytile: a plugin-based, multi-backend compiler for Triton-style tile kernels."""

__version__ = "0.1.0"
