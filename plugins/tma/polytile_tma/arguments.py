"""Host descriptors as kernel arguments: the adapter polytile's runtime asks for a
``TensorDescriptor`` (``polytile_adapt_argument``).

A descriptor argument passes as its parts: the base pointer, the shape (i32 each) and the
strides but the last (i64 each; the last is 1, Triton's rule, and is compiled in).  The
kernel gets one parameter per part and its name stands for the descriptor made from them
(``tma.make_descriptor``), so the kernel body is the same whether the descriptor came from
the host or from ``pl.make_tensor_descriptor``, and every target runs it through the same
lowering.  The launch is keyed by what changes the compiled code: the element type, the
block shape, the padding, and which shape entries and strides are multiples of 16 (hints,
as Triton specializes them).
"""

from __future__ import annotations

from typing import Any, Hashable

from polytile.runtime.adapters import ArgumentAdapter, LaunchPart

from . import host
from .host import BROKEN, _describe_base

_I32_MAX = 2**31 - 1


class DescriptorAdapter(ArgumentAdapter):
    """How a :class:`~polytile_tma.host.TensorDescriptor` passes to kernels."""

    name = "TensorDescriptor"
    #: ``(key, parts)`` of a descriptor (``host.key_and_parts``: C where it is built).  The
    #: descriptor keeps its last answer with what it was computed from (its base and that
    #: base's address and dtype, each field, a copy of each list field) and reuses it only
    #: while all of them are the same, so a change in place is seen too.
    key_and_parts = staticmethod(host.key_and_parts)
    #: The same answer for the native dispatcher, from C (None without the C module).
    native_answer = getattr(host._NATIVE, "native_answer", None)

    def key(self, value: Any) -> Hashable:
        return host.key_and_parts(value)[0]

    def flatten(self, value: Any) -> tuple:
        return self.key_and_parts(value)[1]

    def ir_type(self, key: Any) -> Any:
        from polytile.ir import types as t

        from .types import TensorDescType

        element, block, padding = key[0], key[1], key[2]
        return TensorDescType(t.TileType(block, t.SCALAR_TYPES[element]), padding)

    def parts(self, key: Any) -> list[LaunchPart]:
        from polytile.ir import types as t

        element, block, _, shape16, stride16 = key
        parts = [LaunchPart("_base", t.PointerType(t.SCALAR_TYPES[element]), 16)]
        parts += [LaunchPart(f"_shape{d}", t.i32, 16 if div else 1) for d, div in enumerate(shape16)]
        parts += [LaunchPart(f"_stride{d}", t.i64, 16 if div else 1) for d, div in enumerate(stride16)]
        return parts

    def build(self, key: Any, parts: list) -> Any:
        from .language import make_tensor_descriptor

        rank = len(key[1])
        base, shape, strides = parts[0], parts[1:1 + rank], parts[1 + rank:]
        return make_tensor_descriptor(base, list(shape), [*strides, 1], list(key[1]), padding_option=key[2])

    def check(self, kernel: str, argument: str, value: Any) -> None:
        value.check_for_launch(kernel, argument)
        too_big = [f"shape[{d}] = {int(s)}" for d, s in enumerate(value.shape) if int(s) > _I32_MAX]
        if too_big:
            from polytile.errors import LaunchError

            raise LaunchError(f"kernel '{kernel}': argument '{argument}' (a TensorDescriptor): {', '.join(too_big)} "
                              f"does not fit in 32 bits; a descriptor's shape entries are i32, as in Triton")

    def storage(self, value: Any) -> Any:
        return value.base

    def for_target(self, target: Any) -> "ArgumentAdapter":
        from .staging import has_bulk_copies

        return BULK_ADAPTER if has_bulk_copies(target) else self


#: The encoder's module, imported at the first tensor map (it costs a few ms; a program
#: that never launches on Hopper never imports it).  Its functions are looked up at each
#: use, so tests may replace them.
_TENSORMAP: list = []


def _import_tensormap() -> Any:
    from . import tensormap

    _TENSORMAP.append(tensormap)
    return tensormap


#: Key -> its bulk copy plan (or None); asked at every launch, so a dict lookup.
_PLANS: dict = {}


def _bulk_plan(key: Any) -> Any:
    """The bulk copy plan of the descriptors of ``key`` (None: they pass no tensor map)."""
    try:
        return _PLANS[key]
    except KeyError:
        pass
    plan = None
    if key is not BROKEN:
        from polytile.ir import types as t

        from .bulk import box_plan

        plan = box_plan(t.SCALAR_TYPES[key[0]].width, tuple(key[1]))
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _encode_map(key: Any, parts: tuple, address: int) -> bytes:
    """The tensor map of a descriptor keyed ``key`` whose parts are ``parts`` and whose
    base lies at ``address``; LaunchError when the driver cannot encode it."""
    tensormap = _TENSORMAP[0] if _TENSORMAP else _import_tensormap()
    rank, plan = len(key[1]), _bulk_plan(key)
    shape, strides = parts[1:1 + rank], (*parts[1 + rank:], 1)
    try:
        return tensormap.encode_tensor_map(address, key[0], shape, strides, plan.box, plan.swizzle, key[2])
    except tensormap.TensorMapError as exc:
        from polytile.errors import LaunchError

        raise LaunchError(f"a TensorDescriptor (shape {list(shape)}, strides {list(strides)}, block "
                          f"{list(key[1])}) cannot be passed as a tensor map: {exc}") from None


def python_bulk_key_and_parts(value: Any) -> tuple:
    """``(key, parts)`` for a Hopper launch: :func:`host.launch_answer`'s, and the tensor
    map last where the key's blocks move as bulk copies (the C module's
    ``bulk_key_and_parts`` does the same, keeping the maps it made)."""
    key, parts = host.key_and_parts(value)
    if _bulk_plan(key) is None:
        return key, parts
    return key, (*parts, _encode_map(key, parts, _describe_base(value.base).address))


if host._NATIVE is not None:
    host._NATIVE.configure(bulk_plans=_PLANS, plan_of=_bulk_plan, encode_map=_encode_map,
                           slow_bulk_key_and_parts=python_bulk_key_and_parts)
    _bulk_key_and_parts = host._NATIVE.bulk_key_and_parts
else:
    _bulk_key_and_parts = python_bulk_key_and_parts


class BulkDescriptorAdapter(DescriptorAdapter):
    """Descriptors passed to a kernel for a target with bulk tensor copies (Hopper): the
    parts of :class:`DescriptorAdapter` and, where a bulk copy can move the block, the
    tensor map (``_map``, 128 bytes by value), encoded for the plan the kernel's copies
    follow (:func:`~.bulk.box_plan`) and cached per address, shape, strides, block,
    element, swizzle and padding (:func:`~.tensormap.encode_tensor_map`)."""

    def parts(self, key: Any) -> list[LaunchPart]:
        parts = super().parts(key)
        if _bulk_plan(key) is not None:
            from .types import TENSOR_MAP_ALIGNMENT, TensorMapType

            parts.append(LaunchPart("_map", TensorMapType(), TENSOR_MAP_ALIGNMENT))
        return parts

    def build(self, key: Any, parts: list) -> Any:
        if _bulk_plan(key) is None:
            return super().build(key, parts)
        from .language import descriptor_from_parts

        rank = len(key[1])
        base, shape, strides, tensor_map = parts[0], parts[1:1 + rank], parts[1 + rank:-1], parts[-1]
        return descriptor_from_parts(base, list(shape), list(strides), list(key[1]), key[2], tensor_map)

    #: The parts with the tensor map (C where it is built, keeping the maps it made).
    key_and_parts = staticmethod(_bulk_key_and_parts)
    native_answer = getattr(host._NATIVE, "native_bulk_answer", None)


def forget_tensor_maps() -> None:
    """Drop every tensor map kept for launches (the C module keeps them per address,
    shape, strides and key; ``tensormap`` keeps its own)."""
    if host._NATIVE is not None:
        host._NATIVE.forget_maps()
    if _TENSORMAP:
        _TENSORMAP[0]._MAPS.clear()


#: The one adapter of each kind (they hold no state).
ADAPTER = DescriptorAdapter()
BULK_ADAPTER = BulkDescriptorAdapter()


__all__ = ["ADAPTER", "BULK_ADAPTER", "BulkDescriptorAdapter", "DescriptorAdapter"]
