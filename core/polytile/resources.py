"""What a compiled kernel takes of the device: registers, spills, shared memory, occupancy.

A backend that knows records it as the compile artifact ``resources``, a JSON dict, so
that it is part of the compile metadata (``CompileResult.metadata["resources"]``,
``CompiledKernel.metadata``), kept in the on-disk cache and written into the JSON file of
``polytile compile``::

    {
      "registers": 168,                # 32-bit registers per thread (AMD: VGPRs, AGPRs included)
      "spills": {"store_bytes": 0, "load_bytes": 0},   # in the backend's units; all 0: none
      "stack_bytes": 0,                # local (AMD: private) memory per thread
      "shared_bytes": 98304,           # shared memory (LDS) per block
      "occupancy": {"blocks_per_sm": 1, "warps_per_sm": 4, "limited_by": "shared memory"},
      "notes": [],                     # the assembler's remarks about speed, word for word
    }

Each backend's keys are in docs/resources.md.  The core reads only
``spills``, to warn once per specialization about a kernel that spills
(:class:`SpillWarning`), and formats the record for people (:func:`describe`), in the
IR dump (``POLYTILE_DUMP_IR``) and ``polytile compile``'s output.
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from .errors import user_stack_level

#: The compile artifact a backend records the resources in.
RESOURCES = "resources"


class SpillWarning(UserWarning):
    """A compiled kernel keeps values in local memory because its registers ran out: it
    runs, but slower.  Given once per specialization and process, when the kernel is
    compiled or read from the on-disk cache."""


def spills(resources: Mapping[str, Any] | None) -> dict[str, int]:
    """What spilled (only the non-zero entries of ``resources["spills"]``)."""
    found = (resources or {}).get("spills") or {}
    return {key: value for key, value in found.items() if isinstance(value, int) and value > 0}


def _spilled(key: str, value: int) -> str:
    """``"936 bytes of spill stores"`` (``store_bytes``), ``"37 VGPRs"`` (``vgprs``)."""
    if key.endswith("_bytes"):
        return f"{value} bytes of spill {key[:-len('_bytes')]}s"
    if key.endswith("gprs"):
        return f"{value} {key[:-1].upper()}s"
    return f"{value} {_words(key)}"


def _words(key: str) -> str:
    return key.replace("_", " ").replace(" sm", " SM").replace(" cu", " CU").replace(" simd", " SIMD")


def describe(resources: Mapping[str, Any] | None) -> str:
    """One line for people: ``"168 registers, no spills, 98304 bytes shared memory;
    occupancy: 1 blocks per SM, 4 warps per SM, limited by shared memory"``."""
    if not resources:
        return "not reported by this backend"
    parts = []
    if "registers" in resources:
        parts.append(f"{resources['registers']} registers")
    spilled = spills(resources)
    if "spills" in resources:
        parts.append("spills: " + ", ".join(_spilled(key, value) for key, value in spilled.items())
                     if spilled else "no spills")
    if resources.get("stack_bytes"):
        parts.append(f"{resources['stack_bytes']} bytes stack")
    if "shared_bytes" in resources:
        parts.append(f"{resources['shared_bytes']} bytes shared memory")
    text = ", ".join(parts)
    occupancy = resources.get("occupancy")
    if occupancy:
        numbers = [f"{value} {_words(key)}" for key, value in occupancy.items() if key != "limited_by"]
        text += "; occupancy: " + ", ".join(numbers)
        if occupancy.get("limited_by"):
            text += f", limited by {occupancy['limited_by']}"
    for note in resources.get("notes") or ():
        text += f"; assembler: {note}"
    return text


def warn_if_spilling(kernel: str, target: Any, resources: Mapping[str, Any] | None, specialization: str) -> None:
    """Warn (:class:`SpillWarning`) when ``resources`` says the kernel spills.

    ``specialization`` names the compile (``"BLOCK_M=128, BLOCK_N=256, num_warps=4"``),
    so that one warning is given per specialization: Python's warning filter shows a
    given message once per place."""
    spilled = spills(resources)
    if not spilled:
        return
    amounts = ", ".join(_spilled(key, value) for key, value in spilled.items())
    where = f" ({specialization})" if specialization else ""
    warnings.warn(SpillWarning(
        f"kernel '{kernel}'{where} spills registers on {target}: {amounts} "
        f"({resources.get('registers', '?')} registers per thread); it runs, but slower. Smaller blocks, more "
        "warps (num_warps) or fewer stages (num_stages) give each thread fewer values to hold"),
        stacklevel=user_stack_level())


__all__ = ["RESOURCES", "SpillWarning", "describe", "spills", "warn_if_spilling"]
