"""``triton.runtime``: polytile's runtime names, and ``driver.active`` answering what
Triton's test scaffolding asks of it (the target of the current configuration)."""

from __future__ import annotations

from polytile.runtime import *  # noqa: F401,F403
from polytile.runtime import Autotuner, Config, Heuristics, JITFunction, TensorWrapper, reinterpret  # noqa: F401

from . import driver, errors, jit  # noqa: F401
