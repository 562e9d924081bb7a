"""Targets: ``backend:arch`` strings such as ``nvidia:sm_90a``, ``amd:gfx942`` or ``interp``."""

from __future__ import annotations

import re
from typing import NamedTuple

from .errors import TargetError

_BACKEND_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_ARCH_NAME = re.compile(r"^[A-Za-z0-9_.+-]+$")


class Target(NamedTuple):
    """A backend name and, for hardware backends, an architecture.

    ``Target.parse("nvidia:sm_90a")`` and ``str(target)`` round-trip.  Whether the backend
    exists and knows the architecture is checked by the plugin manager, which knows what
    is installed; this class only checks the syntax.  (A named tuple rather than a
    dataclass: it is made at import, and a dataclass's generated methods cost more to make.)
    """

    backend: str
    arch: str | None = None

    @classmethod
    def parse(cls, text: "str | Target", where: str = "") -> "Target":
        if isinstance(text, Target):
            return text
        source = f" (from {where})" if where else ""
        if not isinstance(text, str):
            raise TargetError(f"target{source} must be a string like 'nvidia:sm_90a', got {type(text).__name__} {text!r}")
        stripped = text.strip()
        backend, sep, arch = stripped.partition(":")
        if not _BACKEND_NAME.match(backend):
            raise TargetError(
                f"malformed target {text!r}{source}: expected 'backend:arch' "
                "(for example 'nvidia:sm_90a', 'amd:gfx942') or 'interp'"
            )
        if sep and not _ARCH_NAME.match(arch):
            raise TargetError(f"malformed target {text!r}{source}: the architecture after ':' is empty or has odd characters")
        return cls(backend, arch if sep else None)

    def __str__(self) -> str:
        return f"{self.backend}:{self.arch}" if self.arch else self.backend
