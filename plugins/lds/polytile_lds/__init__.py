"""polytile-lds: LDS sizing and occupancy for the AMD backend of polytile.

The names below are imported on first use: loading the plugin (``polytile_lds.plugin``,
which every polytile process does) must not import the passes it only needs when
compiling for AMD.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_HOMES = {"Occupancy": "occupancy", "occupancy": "occupancy", "LdsFit": "passes", "LdsVerify": "passes",
          "REMEDIES": "remedies", "REMEDY_ORDER": "remedies", "conversions_in_rounds": "remedies",
          "register_remedy": "remedies"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'polytile_lds' has no attribute '{name}'")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
