"""Hopper tensor maps: the 128 bytes ``cuTensorMapEncodeTiled`` writes for a descriptor.

On sm_90a a host :class:`~polytile_tma.host.TensorDescriptor` also passes to the kernel
as a CUDA tensor map (``CUtensorMap``), the opaque description of the array and of the
box every bulk tensor copy moves, which the kernel takes by value as a grid constant.
:func:`encode_tensor_map` makes those bytes from what a descriptor says, in polytile's
order (outermost dimension first, strides in elements); the driver wants the innermost
dimension first and strides in bytes.

A launch with a descriptor asks for its map every time, so the maps are cached by
everything they are made from (the address included: the same shape elsewhere is
another map); a hit is one dict lookup, a miss one call into the driver through ctypes.
What the driver would refuse with nothing better than CUDA_ERROR_INVALID_VALUE is
checked first, in Python, and explained.

The NVIDIA backend (``polytile_nvidia``) is imported on the first miss, never when this
module is: the plugin loads on machines without CUDA.
"""

from __future__ import annotations

import operator
from typing import Any, Callable


class TensorMapError(ValueError):
    """A tensor map that cannot be made: the rule it breaks, or the driver's refusal,
    with the values it was asked for."""


#: polytile element type -> (CUtensorMapDataType value, bytes per element, floating point
#: for the driver, i.e. may pad with NaN).  The driver has no signed 8- or 16-bit types
#: and no fp8 ones: a copy moves bytes, so those pass as the unsigned type of their width
#: (fp8 as UINT8, as Triton does).  i1 has no tensor-map type at all.
_ELEMENTS: dict[str, tuple[int, int, bool]] = {
    "i8": (0, 1, False), "u8": (0, 1, False), "f8e4m3": (0, 1, False), "f8e5m2": (0, 1, False),
    "i16": (1, 2, False), "u16": (1, 2, False),
    "u32": (2, 4, False), "i32": (3, 4, False),
    "u64": (4, 8, False), "i64": (5, 8, False),
    "f16": (6, 2, True), "f32": (7, 4, True), "f64": (8, 8, True), "bf16": (9, 2, True),
}
#: Swizzle width in bytes -> CUtensorMapSwizzle.
_SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
#: Padding -> CUtensorMapFloatOOBfill ("nan": CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA).
_FILLS = {"zero": 0, "nan": 1}
_INTERLEAVE_NONE = 0
#: CU_TENSOR_MAP_L2_PROMOTION_L2_128B.  Triton 3.6's NVIDIA driver (driver.c,
#: fillTMADescriptorTiled) encodes every tiled map with it; we do the same, so that a
#: kernel moving the same boxes fetches DRAM into L2 at the same granularity as Triton's.
_L2_PROMOTION = 2
MAX_RANK = 5
_MAX_BOX = 256
_MAX_DIM = 1 << 32
_MAX_STRIDE_BYTES = 1 << 40
#: The cache is cleared when it holds this many maps (a long run making new arrays).
_MAX_CACHED = 4096

_MAPS: dict[tuple, bytes] = {}
#: (encode, calls): the driver's cuTensorMapEncodeTiled as
#: :func:`polytile_nvidia.driver_calls.tensor_map_encoder` answers it, and the driver's
#: calls (for error descriptions); found on the first miss.
_encoder: tuple[Callable[..., tuple], Any] | None = None


def encode_tensor_map(address: int, element: str, shape: tuple, strides: tuple, box: tuple, swizzle: int,
                      padding: str) -> bytes:
    """The 128 bytes of the tensor map of the array at ``address`` (a global address) of
    ``element`` values (a polytile scalar type name: ``"f16"``, ``"i32"``, ...), with
    ``shape`` and ``strides`` (in elements; the last stride 1) outermost dimension first,
    whose copies move boxes of ``box`` elements, swizzled across ``swizzle`` bytes (0,
    32, 64 or 128) in shared memory, reading ``padding`` (``"zero"`` or ``"nan"``)
    outside the array.  Raises :class:`TensorMapError` for a map that cannot be made."""
    try:
        found = _MAPS.get((address, element, shape, strides, box, swizzle, padding))
    except TypeError:  # lists, say: looked up again once checked and made tuples
        found = None
    if found is not None:
        return found
    return _encode_new(address, element, shape, strides, box, swizzle, padding)


def _encode_new(address: Any, element: Any, shape: Any, strides: Any, box: Any, swizzle: Any, padding: Any) -> bytes:
    key = _checked(address, element, shape, strides, box, swizzle, padding)
    found = _MAPS.get(key)
    if found is not None:
        return found
    address, element, shape, strides, box, swizzle, padding = key
    data_type, size, _ = _ELEMENTS[element]
    rank = len(shape)
    encode, calls = _encoder or _find_encoder()
    # The driver's order is innermost first; its strides are those of dimensions 1 to
    # rank - 1 (the innermost is contiguous), in bytes.
    err, tensor_map = encode(data_type, rank, address, shape[::-1], [s * size for s in strides[-2::-1]],
                             box[::-1], (1,) * rank, _INTERLEAVE_NONE, _SWIZZLES[swizzle], _L2_PROMOTION,
                             _FILLS[padding])
    if err:
        raise TensorMapError(f"cuTensorMapEncodeTiled refused the tensor map: {_error_text(err, calls)}; "
                             f"{_values(key)}")
    if len(tensor_map) != 128:
        raise TensorMapError(f"cuTensorMapEncodeTiled answered {len(tensor_map)} bytes, not 128; {_values(key)}")
    if len(_MAPS) >= _MAX_CACHED:
        _MAPS.clear()
    _MAPS[key] = tensor_map
    return tensor_map


def _find_encoder() -> tuple[Callable[..., tuple], Any]:
    global _encoder
    from polytile_nvidia import driver
    from polytile_nvidia.driver_calls import tensor_map_encoder

    calls = driver.initialize()
    _encoder = (tensor_map_encoder(calls), calls)
    return _encoder


def _error_text(err: Any, calls: Any) -> str:
    name = getattr(err, "name", None) or f"CUDA error {int(err)}"
    try:
        status, text = calls.cuGetErrorString(err)
        description = text.decode(errors="replace") if not status and text else ""
    except Exception:  # noqa: BLE001 - a description is a nicety; the refusal is still reported
        description = ""
    return f"{name} ({description})" if description else name


def _values(key: tuple) -> str:
    address, element, shape, strides, box, swizzle, padding = key
    return (f"asked for element {element}, shape {shape}, strides {strides} (elements), box {box}, swizzle "
            f"{swizzle}, padding {padding!r}, address {address:#x}")


def _ints(name: str, values: Any) -> tuple[int, ...]:
    if type(values) is tuple:
        for value in values:
            if type(value) is not int:
                break
        else:
            return values
    try:
        return tuple(map(operator.index, values))
    except TypeError:
        raise TensorMapError(f"the tensor map's {name} must be a sequence of integers, not {values!r}") from None


def _checked(address: Any, element: Any, shape: Any, strides: Any, box: Any, swizzle: Any,
             padding: Any) -> tuple:
    """The arguments as the cache keys them (ints in tuples), once they pass the rules
    the driver would refuse with a bare CUDA_ERROR_INVALID_VALUE, and the one it cannot
    see (the last stride 1).  A miss pays for this check: it is one pass over the
    entries, and :func:`_explain` finds the rule broken only when one is."""
    if type(element) is not str or element not in _ELEMENTS:
        raise TensorMapError(f"element type {element!r} has no tensor map: TMA copies "
                             f"{', '.join(_ELEMENTS)}")
    _, size, is_float = _ELEMENTS[element]
    if type(padding) is not str or padding not in _FILLS:
        raise TensorMapError(f"padding {padding!r} is not one of 'zero' or 'nan'")
    if padding == "nan" and not is_float:
        why = " (fp8 passes to the driver as bytes, UINT8, as in Triton)" if element.startswith("f8") else ""
        raise TensorMapError(f"padding 'nan' needs floating-point elements (f16, bf16, f32, f64); {element} "
                             f"elements{why} can only pad with zero")
    try:
        swizzle_bytes = None if isinstance(swizzle, bool) else operator.index(swizzle)
    except TypeError:
        swizzle_bytes = None
    if swizzle_bytes not in _SWIZZLES:
        raise TensorMapError(f"swizzle {swizzle!r} is not 0, 32, 64 or 128 (bytes)")
    try:
        address = operator.index(address)
    except TypeError:
        raise TensorMapError(f"the tensor map's address must be an integer, not {address!r}") from None
    if not 0 <= address < 1 << 64:
        raise TensorMapError(f"the tensor map's address {address:#x} is not a 64-bit address")
    shape, strides, box = _ints("shape", shape), _ints("strides", strides), _ints("box", box)
    key = (address, element, shape, strides, box, swizzle_bytes, padding)
    rank = len(shape)
    if 1 <= rank <= MAX_RANK and len(strides) == rank and len(box) == rank and not address & 15 and strides[-1] == 1:
        inner = box[-1] * size
        valid = not inner & 15 and (not swizzle_bytes or inner <= swizzle_bytes)
        for d in range(rank):
            if not (0 < shape[d] <= _MAX_DIM and 0 < box[d] <= _MAX_BOX):
                valid = False
        for d in range(rank - 1):
            stride = strides[d] * size
            if stride < 0 or stride & 15 or stride >= _MAX_STRIDE_BYTES:
                valid = False
        if valid:
            return key
    _explain(key, size, rank)
    raise AssertionError(f"tensormap._explain found no broken rule in {key}")  # the checks above and below differ


def _explain(key: tuple, size: int, rank: int) -> None:
    """Raise the TensorMapError naming the first rule ``key`` breaks."""
    address, element, shape, strides, box, swizzle_bytes, _ = key
    if not 1 <= rank <= MAX_RANK:
        raise _refused(key, f"a tensor map has 1 to {MAX_RANK} dimensions, not {rank}")
    if len(strides) != rank or len(box) != rank:
        raise _refused(key, f"shape, strides and box must have one entry per dimension ({rank})")
    if address % 16:
        raise _refused(key, f"the address must be a multiple of 16 bytes (it is {address % 16} past one)")
    for d, extent in enumerate(shape):
        if not 1 <= extent <= _MAX_DIM:
            raise _refused(key, f"shape[{d}] = {extent}: each extent must be 1 to 2**32")
    if strides[-1] != 1:
        raise _refused(key, f"the last stride is {strides[-1]}: the innermost dimension must be contiguous "
                            "(stride 1)")
    for d, stride in enumerate(strides[:-1]):
        if stride < 0 or (stride * size) % 16 or stride * size >= _MAX_STRIDE_BYTES:
            raise _refused(key, f"strides[{d}] = {stride} elements = {stride * size} bytes: every stride but the last "
                                f"must be a multiple of 16 bytes ({16 // size} {element} elements) and below 2**40 "
                                "bytes")
    for d, extent in enumerate(box):
        if not 1 <= extent <= _MAX_BOX:
            raise _refused(key, f"box[{d}] = {extent}: each box extent must be 1 to {_MAX_BOX} elements")
    inner = box[-1] * size
    if inner % 16:
        raise _refused(key, f"box[-1] = {box[-1]} {element} elements = {inner} bytes: the innermost box extent must "
                            "be a multiple of 16 bytes")
    if swizzle_bytes and inner > swizzle_bytes:
        raise _refused(key, f"box[-1] = {box[-1]} {element} elements = {inner} bytes: with swizzle {swizzle_bytes}, "
                            f"the innermost box extent must be at most {swizzle_bytes} bytes "
                            f"({swizzle_bytes // size} elements)")


def _refused(key: tuple, rule: str) -> TensorMapError:
    return TensorMapError(f"{rule}; {_values(key)}")


__all__ = ["MAX_RANK", "TensorMapError", "encode_tensor_map"]
