"""Loop-invariant address offsets that ptxas keeps in registers (the pass ``keep-loop-offsets``).

LLVM's loop strength reduction turns a loop's tile of pointers, each advanced by the
same step, into one moving base plus one loop-invariant 64-bit offset per pointer, and
the NVPTX backend writes each offset as one ``mul.wide.s32 %rd, %r, 2`` (the element
offset times the element size).  ptxas then saves a register per offset: it keeps the
32-bit ``%r`` instead and recomputes the 64-bit address with an ``IMAD.WIDE`` right before
each use, inside the loop.  In a pipelined matmul those recomputations sit between the
``cp.async`` copies and overwrite registers that copies still have to read, so each one
waits for an earlier copy to be accepted by the memory pipeline: the copies of one
iteration took 412 cycles where Triton's take 178 (4-warp 128x128x64 fp16 matmul, H100,
per-iteration clock stamps).  Written as ``cvt.s64.s32`` then ``shl.b64`` (the same
value; Triton's PTX has this form), an offset is no longer one instruction away from a
narrower register, ptxas keeps it whole, and the loop adds it to the base with two
integer adds: the copies took 226 cycles and the kernel went from 510 to 588 TFLOP/s
(4096^3), from 456 to 580 (8192^3).

Only offsets that matter are rewritten: a ``mul.wide`` by a power of two (an element
size: what address offsets are), whose register is written nowhere else in the
function, that is defined outside a loop and read inside it.  A multiply used only in
straight-line code is left alone (there ``IMAD.WIDE`` is the cheapest form).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from polytile.errors import PolytileError
from polytile.passes.pass_base import Pass, PassContext, PreservedAnalyses

#: The artifact holding the PTX (what emit-ptx writes).
PTX = "ptx"

_FUNCTION = re.compile(r"^(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\b")
_LABEL = re.compile(r"^\s*(\$[\w$]+):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$[\w$]+)\s*;")
_MUL_WIDE = re.compile(r"^(\s*)mul\.wide\.([su])32\s+(%rd\d+)\s*,\s*(%r\d+)\s*,\s*(\d+)\s*;\s*$")
# The register an instruction writes: its first operand (predicated or not).
_DESTINATION = re.compile(r"^\s*(?:@!?%\w+\s+)?[a-z][\w.:]*\s+(%\w+)\s*[,;]")
_REGISTER = re.compile(r"%\w+")


def _functions(lines: list[str]) -> list[tuple[int, int]]:
    """[start, end) line ranges of each function in the PTX (registers are per function)."""
    starts = [i for i, line in enumerate(lines) if _FUNCTION.match(line)]
    return [(s, e) for s, e in zip(starts, starts[1:] + [len(lines)])]


def _loops(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """[first, last] line ranges of the loops in lines[start:end]: a branch back to a
    label above it closes a loop that starts at the label."""
    labels = {}
    loops = []
    for i in range(start, end):
        label = _LABEL.match(lines[i])
        if label:
            labels[label.group(1)] = i
        branch = _BRANCH.search(lines[i])
        if branch and branch.group(1) in labels:
            loops.append((labels[branch.group(1)], i))
    return loops


def keep_loop_offsets(ptx: str) -> tuple[str, int]:
    """``ptx`` with each loop-invariant ``mul.wide`` address offset (see the module's
    docstring) written as ``cvt`` then ``shl``, and how many were rewritten."""
    lines = ptx.split("\n")
    rewrites: dict[int, list[str]] = {}
    for start, end in _functions(lines):
        loops = _loops(lines, start, end)
        if not loops:
            continue
        definitions: dict[str, int] = {}
        reads: dict[str, list[int]] = {}
        for i in range(start, end):
            destination = _DESTINATION.match(lines[i])
            written = destination.group(1) if destination else None
            if written is not None:
                definitions[written] = definitions.get(written, 0) + 1
            for register in _REGISTER.findall(lines[i]):
                if register != written:
                    reads.setdefault(register, []).append(i)
        for i in range(start, end):
            found = _MUL_WIDE.match(lines[i])
            if not found:
                continue
            indent, sign, wide, narrow, factor = found.groups()
            shift = int(factor).bit_length() - 1
            # A power of two the 32-bit immediate holds as a positive number (an element size).
            if int(factor) <= 1 or int(factor) != 1 << shift or shift > (30 if sign == "s" else 31) \
                    or definitions.get(wide) != 1:
                continue
            if not any(first <= read <= last and not first <= i <= last
                       for first, last in loops for read in reads.get(wide, ())):
                continue
            kind = "s" if sign == "s" else "u"
            rewrites[i] = [f"{indent}cvt.{kind}64.{kind}32 \t{wide}, {narrow};",
                           f"{indent}shl.b64 \t{wide}, {wide}, {shift};"]
    if not rewrites:
        return ptx, 0
    out: list[str] = []
    for i, line in enumerate(lines):
        out.extend(rewrites.get(i, (line,)))
    return "\n".join(out), len(rewrites)


@dataclass
class KeepLoopOffsets(Pass):
    """Loop-invariant 64-bit address offsets in the PTX written so that ptxas keeps them
    in registers instead of recomputing them inside the loop (see
    :mod:`polytile_nvidia.loop_offsets`)."""

    name: ClassVar[str] = "keep-loop-offsets"
    summary: ClassVar[str] = "loop-invariant address offsets in the PTX as cvt + shl, which ptxas keeps in registers"

    def run(self, module: Any, context: PassContext) -> PreservedAnalyses:
        ptx = context.artifacts.get(PTX)
        if ptx is None:
            raise PolytileError("keep-loop-offsets rewrites the PTX that emit-ptx makes; put it after emit-ptx")
        context.artifacts[PTX], _ = keep_loop_offsets(ptx)
        return PreservedAnalyses.all()


__all__ = ["KeepLoopOffsets", "keep_loop_offsets"]
