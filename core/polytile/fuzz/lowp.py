"""bf16 and fp8 (e4m3 "float8e4nv", e5m2 "float8e5") in generated kernels.

NumPy has none of these types, so the interpreter cannot run a kernel that holds one.
Each generated kernel takes a ``EMULATE: pl.constexpr``: the interpreter runs it with
``EMULATE=True``, where every conversion is one of the helpers below (integer and f32
arithmetic that rounds to nearest-even exactly as the hardware does), and a GPU runs it
with ``EMULATE=False``, where the conversion is the language's own ``.to(...)`` or a
load of a bf16/fp8 tensor.  Only the taken branch of a static ``if`` is compiled, so the
GPU kernel contains the real conversion instructions.

The emulation covers finite values inside each format's range (the generator keeps
values there); NaN, infinities and saturation are not exercised.
"""

from __future__ import annotations

from typing import NamedTuple


class LowPrecision(NamedTuple):
    tag: str
    language: str  # the polytile.language dtype
    torch: str  # the torch dtype of a tensor of this type
    storage: str  # the NumPy dtype holding its bits on the interpreter
    mantissa_bits: int
    min_exponent: int  # of the smallest normal number
    max_value: float  # largest finite value


BF16 = LowPrecision("bf16", "bfloat16", "bfloat16", "uint16", 7, -126, 3.3895313892515355e38)
E4M3 = LowPrecision("e4m3", "float8e4nv", "float8_e4m3fn", "uint8", 3, -6, 448.0)
E5M2 = LowPrecision("e5m2", "float8e5", "float8_e5m2", "uint8", 2, -14, 57344.0)
FORMATS = (BF16, E4M3, E5M2)
BY_TAG = {f.tag: f for f in FORMATS}

#: Source of the helpers, put at the top of a generated module that needs them.
HELPERS = '''
@pt.jit
def round_bf16(x):
    # f32 -> bf16 -> f32: round the low 16 bits away, to nearest even.
    bits = x.to(pl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(pl.float32, bitcast=True)


@pt.jit
def round_fp8(x, MIN_EXPONENT: pl.constexpr, MANTISSA_BITS: pl.constexpr):
    # f32 -> fp8 -> f32 for finite values in range: scale by a power of two so that
    # the format's last bit is 1, round to an integer (nearest even) and scale back.
    bits = x.to(pl.uint32, bitcast=True)
    exponent = pl.maximum(((bits >> 23) & 0xFF).to(pl.int32) - 127, MIN_EXPONENT) - MANTISSA_BITS
    quantum = ((exponent + 127) << 23).to(pl.float32, bitcast=True)
    inverse = ((127 - exponent) << 23).to(pl.float32, bitcast=True)
    scaled = x * inverse
    rounded = (scaled + 12582912.0) - 12582912.0
    return rounded * quantum


@pt.jit
def bf16_bits_to_f32(bits):
    return (bits.to(pl.uint32) << 16).to(pl.float32, bitcast=True)


@pt.jit
def e5m2_bits_to_f32(bits):
    return (bits.to(pl.uint16) << 8).to(pl.float16, bitcast=True).to(pl.float32)


@pt.jit
def e4m3_bits_to_f32(bits):
    b = bits.to(pl.uint32)
    exponent = (b >> 3) & 0xF
    mantissa = b & 7
    normal = (((exponent + 120) << 23) | (mantissa << 20)).to(pl.float32, bitcast=True)
    subnormal = mantissa.to(pl.float32) * 0.001953125
    magnitude = pl.where(exponent == 0, subnormal, normal)
    return pl.where((b >> 7) == 1, -magnitude, magnitude)


@pt.jit
def f32_to_bf16_bits(x):
    return (round_bf16(x).to(pl.uint32, bitcast=True) >> 16).to(pl.uint16)


@pt.jit
def f32_to_e5m2_bits(x):
    return (round_fp8(x, -14, 2).to(pl.float16).to(pl.uint16, bitcast=True) >> 8).to(pl.uint8)
'''


def round_expression(fmt: LowPrecision, value: str) -> tuple[str, str]:
    """(emulated, native) expressions of ``value`` (f32) rounded to ``fmt`` and back."""
    if fmt is BF16:
        emulated = f"round_bf16({value})"
    else:
        emulated = f"round_fp8({value}, {fmt.min_exponent}, {fmt.mantissa_bits})"
    return emulated, f"{value}.to(pl.{fmt.language}).to(pl.float32)"


def decode_expression(fmt: LowPrecision, loaded: str) -> tuple[str, str]:
    """(emulated, native) f32 expressions of a loaded ``fmt`` value (its bits on the
    interpreter, the value itself on a GPU)."""
    return f"{fmt.tag}_bits_to_f32({loaded})", f"{loaded}.to(pl.float32)"


#: Formats a kernel may store (an e4m3 store would need an encoder; its loads and
#: conversions are covered).
STORABLE = (BF16, E5M2)


def encode_expression(fmt: LowPrecision, value: str) -> tuple[str, str]:
    """(emulated, native) expressions of ``value`` (f32) as the stored ``fmt``."""
    return f"f32_to_{fmt.tag}_bits({value})", f"{value}.to(pl.{fmt.language})"


def quantum(fmt: LowPrecision, magnitude: float) -> float:
    """The spacing of ``fmt`` near ``magnitude`` (an upper bound on one rounding's error x 2)."""
    import math

    exponent = max(math.floor(math.log2(magnitude)) if magnitude > 0 else fmt.min_exponent, fmt.min_exponent)
    return 2.0 ** (exponent - fmt.mantissa_bits)
