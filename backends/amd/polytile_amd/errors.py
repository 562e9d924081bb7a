"""Errors of the AMD backend that callers may want to catch by type."""

from __future__ import annotations

from polytile.errors import CompilationError, OutOfResourcesError, PolytileError

# The core's error, under the name this module always offered: one type to catch for every
# backend (the autotuner drops configs that raise it).
__all__ = ["OutOfResourcesError", "ToolNotFoundError", "DeviceLibsMissingError", "LinkError"]


class ToolNotFoundError(PolytileError):
    """A tool or library of the AMD toolchain could not be found; the message lists every
    place that was tried."""

    def __init__(self, what: str, looked: list[str], hint: str):
        self.what = what
        self.looked = list(looked)
        places = "\n".join(f"  - {place}" for place in looked) or "  (nowhere: no place was configured)"
        super().__init__(f"{what} not found; looked in:\n{places}\n{hint}")


class DeviceLibsMissingError(CompilationError):
    """A kernel uses a math function that only the ROCm device libraries provide here,
    and they were not found."""


class LinkError(PolytileError):
    """ld.lld failed to link a kernel's object into a code object."""
