"""AMD matrix cores for ``tile.dot``: which MFMA (CDNA: gfx90a, gfx942, gfx950) or WMMA
(RDNA3: gfx1100) instruction serves which operand types, and the LLVM intrinsic of each.

:data:`AMD_MATRIX` is the matrix unit of the AMD backend (registered by :mod:`.codegen`;
see :mod:`polytile.gpu.lowering.dot`).  The instructions, in the order they are
preferred (the first whose M, N and K fit the dot wins):

========  ============  ===============================================  =========
operands  archs         instruction (``llvm.amdgcn.*``)                   k_width
========  ============  ===============================================  =========
f16       gfx950        ``mfma.f32.32x32x16.f16`` / ``16x16x32.f16``     8
f16       gfx9          ``mfma.f32.32x32x8f16`` / ``16x16x16f16``        4
bf16      gfx950        ``mfma.f32.32x32x16.bf16`` / ``16x16x32.bf16``   8
bf16      gfx9          ``mfma.f32.32x32x8bf16.1k`` / ``16x16x16bf16.1k`` 4
f32       gfx9          ``mfma.f32.32x32x2f32`` / ``16x16x4f32``         1
i8        gfx942/950    ``mfma.i32.32x32x16.i8`` / ``16x16x32.i8``       8
i8        gfx90a        ``mfma.i32.32x32x8i8`` / ``16x16x16i8``          4
f64       gfx9          ``mfma.f64.16x16x4f64``                          1
f16/bf16  gfx1100       ``wmma.f32.16x16x16.f16`` / ``.bf16`` (wave32)   16
i8        gfx1100       ``wmma.i32.16x16x16.iu8`` (signed A and B)        16
========  ============  ===============================================  =========

The 32x32 instructions serve dots whose M and N are both at least 32, the 16x16 ones the
rest.  The f32 instructions multiply in full f32 precision, so every ``input_precision``
of an f32 dot (tf32, tf32x3, ieee) takes them.  An f16 accumulator is widened to f32
around each instruction (the units accumulate in f32 only).  What no row fits (f32 or f64
on gfx1100, any dot smaller than 16x16, K below the instruction's) takes the FMA lowering.

The fragments are the ``#gpu.amd_mfma`` / ``#gpu.amd_wmma`` / ``#gpu.dot_operand``
registers in order; tests/backends/amd/test_matrix.py checks them against AMD's lane
tables, and the CTA simulator (tests/gpu/llvm_cta_amdgpu.py) runs the intrinsics from
those tables.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from llvmlite import ir

from polytile.gpu.layouts import DistributedLayout, MfmaLayout, WmmaLayout
from polytile.gpu.lowering.dot import MatrixInstruction
from polytile.ir import types as t

from .architectures import ARCHITECTURES

_I32 = ir.IntType(32)
_I16 = ir.IntType(16)
_F32 = ir.FloatType()
_F64 = ir.DoubleType()

#: Every CDNA architecture: the instructions all of them have.
_MFMA_ARCHS = frozenset(a.name for a in ARCHITECTURES.values() if a.matrix_instructions == "mfma")


@dataclass(frozen=True)
class AmdMatrixSpec:
    """One matrix instruction: its intrinsic, tile and how its operands are passed."""

    #: ``llvm.amdgcn.`` + this.
    intrinsic: str
    archs: frozenset
    operand: t.Type
    #: The accumulator type the instruction computes in (f32, i32 or f64).
    accumulator: t.Type
    #: (M, N, K) of one instruction.
    shape: tuple[int, int, int]
    k_width: int
    #: How a lane's ``k_width`` A or B elements are passed: "vector" (``<k_width x T>``),
    #: "i16" (bf16 bits as ``<k_width x i16>``), "packed" (i8s in one integer), "words"
    #: (i8s in ``<k_width / 4 x i32>``) or "scalar" (one element).
    passing: str
    #: The intrinsic takes ``(signed A, A, signed B, B, C, clamp)`` (WMMA's iu8).
    signed_operands: bool = False

    @property
    def is_wmma(self) -> bool:
        return self.intrinsic.startswith("wmma")

    @property
    def accumulator_registers(self) -> int:
        lanes = 32 if self.is_wmma else 64
        return self.shape[0] * self.shape[1] // lanes


_GFX950 = frozenset({"gfx950"})
_GFX942_UP = frozenset({"gfx942", "gfx950"})
_GFX90A = frozenset({"gfx90a"})
_GFX1100 = frozenset({"gfx1100"})

#: Every instruction, in order of preference for a dot both fit.
SPECS: tuple[AmdMatrixSpec, ...] = (
    AmdMatrixSpec("mfma.f32.32x32x16.f16", _GFX950, t.f16, t.f32, (32, 32, 16), 8, "vector"),
    AmdMatrixSpec("mfma.f32.16x16x32.f16", _GFX950, t.f16, t.f32, (16, 16, 32), 8, "vector"),
    AmdMatrixSpec("mfma.f32.32x32x8f16", _MFMA_ARCHS, t.f16, t.f32, (32, 32, 8), 4, "vector"),
    AmdMatrixSpec("mfma.f32.16x16x16f16", _MFMA_ARCHS, t.f16, t.f32, (16, 16, 16), 4, "vector"),
    AmdMatrixSpec("mfma.f32.32x32x16.bf16", _GFX950, t.bf16, t.f32, (32, 32, 16), 8, "vector"),
    AmdMatrixSpec("mfma.f32.16x16x32.bf16", _GFX950, t.bf16, t.f32, (16, 16, 32), 8, "vector"),
    AmdMatrixSpec("mfma.f32.32x32x8bf16.1k", _MFMA_ARCHS, t.bf16, t.f32, (32, 32, 8), 4, "i16"),
    AmdMatrixSpec("mfma.f32.16x16x16bf16.1k", _MFMA_ARCHS, t.bf16, t.f32, (16, 16, 16), 4, "i16"),
    AmdMatrixSpec("mfma.f32.32x32x2f32", _MFMA_ARCHS, t.f32, t.f32, (32, 32, 2), 1, "scalar"),
    AmdMatrixSpec("mfma.f32.16x16x4f32", _MFMA_ARCHS, t.f32, t.f32, (16, 16, 4), 1, "scalar"),
    AmdMatrixSpec("mfma.i32.32x32x16.i8", _GFX942_UP, t.i8, t.i32, (32, 32, 16), 8, "packed"),
    AmdMatrixSpec("mfma.i32.16x16x32.i8", _GFX942_UP, t.i8, t.i32, (16, 16, 32), 8, "packed"),
    AmdMatrixSpec("mfma.i32.32x32x8i8", _GFX90A, t.i8, t.i32, (32, 32, 8), 4, "packed"),
    AmdMatrixSpec("mfma.i32.16x16x16i8", _GFX90A, t.i8, t.i32, (16, 16, 16), 4, "packed"),
    AmdMatrixSpec("mfma.f64.16x16x4f64", _MFMA_ARCHS, t.f64, t.f64, (16, 16, 4), 1, "scalar"),
    AmdMatrixSpec("wmma.f32.16x16x16.f16", _GFX1100, t.f16, t.f32, (16, 16, 16), 16, "vector"),
    AmdMatrixSpec("wmma.f32.16x16x16.bf16", _GFX1100, t.bf16, t.f32, (16, 16, 16), 16, "i16"),
    AmdMatrixSpec("wmma.i32.16x16x16.iu8", _GFX1100, t.i8, t.i32, (16, 16, 16), 16, "words", signed_operands=True),
)

#: Accumulator types a dot may have for an instruction's: an f16 accumulator rides on f32.
_ACCUMULATES_IN = {t.f16: t.f32}


def warps_per_tile(shape: tuple[int, int], num_warps: int, instr: tuple[int, int]) -> tuple[int, int]:
    """Warps along (M, N): each doubling goes where more instruction tiles remain, M on a
    tie (as NVIDIA's ``warps_per_tile``)."""
    reps = [max(shape[0] // instr[0], 1), max(shape[1] // instr[1], 1)]
    warps = [1, 1]
    while warps[0] * warps[1] < num_warps:
        along = 0 if reps[0] >= reps[1] else 1
        warps[along] *= 2
        reps[along] = max(reps[along] // 2, 1)
    return warps[0], warps[1]


def _result_layout(spec: AmdMatrixSpec, version: int, shape: tuple[int, ...], num_warps: int) -> DistributedLayout:
    m, n, _ = spec.shape
    warps = warps_per_tile((shape[0], shape[1]), num_warps, (m, n))
    if spec.is_wmma:
        return WmmaLayout(version, warps)
    bits = 64 if spec.accumulator == t.f64 else 32
    return MfmaLayout(version, warps, (m, n), False, bits)


# --------------------------------------------------------------------------------------
# Emitting an instruction


def _declare(module: ir.Module, name: str, return_type: ir.Type, argument_types: list) -> ir.Function:
    found = module.globals.get(name)
    return found if found is not None else ir.Function(module, ir.FunctionType(return_type, argument_types), name)


def _vector(builder: ir.IRBuilder, values: list, element: ir.Type) -> Any:
    vector = ir.Constant(ir.VectorType(element, len(values)), None)
    for i, v in enumerate(values):
        vector = builder.insert_element(vector, v, ir.Constant(_I32, i))
    return vector


def _operand(builder: ir.IRBuilder, spec: AmdMatrixSpec, values: list) -> Any:
    if spec.passing == "scalar":
        return values[0]
    if spec.passing == "i16":  # the bf16 intrinsics before gfx950 take the bits
        return _vector(builder, [builder.bitcast(v, _I16) for v in values], _I16)
    if spec.passing in ("packed", "words"):  # k_width i8s, the first in the low byte
        packed = _vector(builder, values, ir.IntType(8))
        words = ir.IntType(8 * len(values)) if spec.passing == "packed" else ir.VectorType(_I32, len(values) // 4)
        return builder.bitcast(packed, words)
    return _vector(builder, values, values[0].type)


def _accumulator_type(spec: AmdMatrixSpec) -> ir.Type:
    return {t.f32: _F32, t.i32: _I32, t.f64: _F64}[spec.accumulator]


def make_emit(spec: AmdMatrixSpec) -> Any:
    """``emit(builder, a, b, c) -> c`` for one instruction of ``spec``."""
    name = "llvm.amdgcn." + spec.intrinsic
    acc_type = _accumulator_type(spec)
    result_type = ir.VectorType(acc_type, spec.accumulator_registers)

    def emit(builder: ir.IRBuilder, a: list, b: list, c: list) -> list:
        given = c[0].type
        if given != acc_type:  # f16 accumulator: the instruction adds in f32
            c = [builder.fpext(v, acc_type) for v in c]
        args = [_operand(builder, spec, a), _operand(builder, spec, b), _vector(builder, c, acc_type)]
        if spec.signed_operands:  # i8 operands are signed (polytile's i8); no clamping
            signed, no = ir.Constant(ir.IntType(1), 1), ir.Constant(ir.IntType(1), 0)
            args = [signed, args[0], signed, args[1], args[2], no]
        if not spec.is_wmma:
            args += [ir.Constant(_I32, 0)] * 3  # cbsz, abid, blgp: no broadcast between blocks
        function = _declare(builder.module, name, result_type, [v.type for v in args])
        d = builder.call(function, args)
        out = [builder.extract_element(d, ir.Constant(_I32, i)) for i in range(spec.accumulator_registers)]
        if given != acc_type:
            out = [builder.fptrunc(v, given) for v in out]
        return out

    return emit


# --------------------------------------------------------------------------------------
# The unit


def candidates(arch: str, a: t.Type, acc: t.Type) -> list[AmdMatrixSpec]:
    """The instructions of ``arch`` for ``a`` operands accumulating in ``acc``, preferred first."""
    wanted = _ACCUMULATES_IN.get(acc, acc)
    return [s for s in SPECS if arch in s.archs and s.operand == a and s.accumulator == wanted]


def choose(arch: str, a: t.Type, acc: t.Type, shape: tuple[int, int, int], nonkdim: int = 0) -> AmdMatrixSpec | None:
    """The instruction for a dot of ``shape = (M, N, K)``: 32x32 tiles where M and N allow,
    else 16x16; None where none fits.  ``nonkdim`` (the option ``matrix_instr_nonkdim``,
    16 or 32) asks for that tile instead, where one fits the dot; where none does (a dot
    smaller than 32, or WMMA's 16x16 only), the choice is as without it."""
    m, n, k = shape
    fitting = [s for s in candidates(arch, a, acc) if m >= s.shape[0] and n >= s.shape[1] and k >= s.shape[2]]
    asked = [s for s in fitting if s.shape[0] == nonkdim]
    return (asked or fitting or [None])[0]


@functools.lru_cache(maxsize=None)
def instruction_for(spec: AmdMatrixSpec, arch: str) -> MatrixInstruction:
    version = ARCHITECTURES[arch].matrix_version
    return MatrixInstruction(
        name=spec.intrinsic, result_layout=functools.partial(_result_layout, spec, version), k_width=spec.k_width,
        k=spec.shape[2], fragments=(spec.k_width, spec.k_width, spec.accumulator_registers), emit=make_emit(spec))


class AmdMatrixUnit:
    """The AMD matrix unit (``MatrixUnit``): MFMA on CDNA, WMMA on RDNA3."""

    def select(self, a: t.Type, acc: t.Type, input_precision: str, shape: tuple[int, int, int], arch: str,
               num_warps: int, nonkdim: int = 0) -> MatrixInstruction | None:
        if arch not in ARCHITECTURES:
            return None
        spec = choose(arch, a, acc, shape, nonkdim)
        return instruction_for(spec, arch) if spec is not None else None


AMD_MATRIX = AmdMatrixUnit()

__all__ = ["AMD_MATRIX", "AmdMatrixSpec", "AmdMatrixUnit", "SPECS", "candidates", "choose", "instruction_for",
           "make_emit", "warps_per_tile"]
