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

import operator
from typing import Any, Hashable

from polytile.runtime.adapters import ArgumentAdapter, LaunchPart

from .host import BROKEN, LAUNCH_FACTS as _LAUNCH, TORCH_TYPES as _TORCH_TYPES, VERSION, _copy, _describe_base, \
    _launch_base, _plainly_valid, remember_launch, still_versioned

_I32_MAX = 2**31 - 1


class DescriptorAdapter(ArgumentAdapter):
    """How a :class:`~polytile_tma.host.TensorDescriptor` passes to kernels."""

    name = "TensorDescriptor"
    # A torch-based descriptor whose changes all replace an entry of its __dict__ says so.
    version_attribute = VERSION

    def key(self, value: Any) -> Hashable:
        # Every launch asks: what the key and the parts depend on is compared with what
        # the last launch of this object saw (the base by identity; its address and
        # element type; the fields by value: a list changed in place counts too), and
        # reused when equal.
        base = value.base
        seen = value.__dict__.get(_LAUNCH)
        if seen is not None and seen[0] is base and type(base) in _TORCH_TYPES:
            # The common relaunch, without building anything: a torch base's address and
            # dtype (a singleton), and the fields against copies of what they were.
            facts = seen[1]
            if (base.data_ptr() == facts[0] and base.dtype is facts[6] and value.shape == facts[2]
                    and value.strides == facts[3] and value.block_shape == facts[4] and value.padding == facts[5]):
                return seen[2]
        try:
            info = _describe_base(base)
            shape, strides = tuple(value.shape), tuple(value.strides)
            block, padding = tuple(value.block_shape), value.padding
        except (TypeError, ValueError, AttributeError):
            return BROKEN  # not a descriptor any more: the launch's check says what is wrong
        if seen is not None and seen[0] is base and seen[1][:6] == (
                info.address, info.element, _copy(value.shape), _copy(value.strides), _copy(value.block_shape),
                padding):
            return seen[2]
        if not _plainly_valid(value, info):
            if value.problems():
                return BROKEN  # the slow path's check names every broken rule
            # Valid, with integers of other types (NumPy's): keyed and passed as ints.
            shape, strides = tuple(map(operator.index, shape)), tuple(map(operator.index, strides))
            block = tuple(map(operator.index, block))
        return remember_launch(value, info, shape, strides, block)

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

    def flatten(self, value: Any) -> tuple:
        # The launch keyed the value just before (the key of this very launch): its parts.
        seen = value.__dict__.get(_LAUNCH)
        if seen is not None and seen[0] is value.base:
            return seen[3]
        return (_launch_base(value.base), *(int(s) for s in value.shape), *(int(s) for s in value.strides[:-1]))

    def key_and_parts(self, value: Any) -> tuple:
        key = self.key(value)  # leaves this launch's parts with the value
        still_versioned(value)
        return key, (value.__dict__[_LAUNCH][3] if key is not BROKEN else ())

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


#: Where a descriptor keeps the parts its last Hopper launch passed: ``(parts, with_map)``.
_BULK_LAUNCH = "_polytile_tensor_map"


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

    def _with_map(self, value: Any, key: Any, parts: tuple) -> tuple:
        cached = value.__dict__.get(_BULK_LAUNCH)
        if cached is not None and cached[0] is parts:
            return cached[1]
        plan = _bulk_plan(key)
        if plan is None:  # no tensor map: the parts as they are, remembered as such
            value.__dict__[_BULK_LAUNCH] = (parts, parts)
            return parts
        tensormap = _TENSORMAP[0] if _TENSORMAP else _import_tensormap()
        rank = len(key[1])
        facts = value.__dict__[_LAUNCH][1]
        shape = parts[1:1 + rank]
        strides = (*parts[1 + rank:], 1)
        try:
            tensor_map = tensormap.encode_tensor_map(facts[0], key[0], shape, strides, plan.box, plan.swizzle, key[2])
        except tensormap.TensorMapError as exc:
            from polytile.errors import LaunchError

            raise LaunchError(f"a TensorDescriptor (shape {list(shape)}, strides {list(strides)}, block "
                              f"{list(key[1])}) cannot be passed as a tensor map: {exc}") from None
        full = (*parts, tensor_map)
        value.__dict__[_BULK_LAUNCH] = (parts, full)
        return full

    def flatten(self, value: Any) -> tuple:
        key = self.key(value)  # leaves this launch's facts with the value
        return self._with_map(value, key, value.__dict__[_LAUNCH][3])

    def key_and_parts(self, value: Any) -> tuple:
        key = self.key(value)
        still_versioned(value)
        if key is BROKEN:
            return key, ()
        return key, self._with_map(value, key, value.__dict__[_LAUNCH][3])


#: The one adapter of each kind (they hold no state).
ADAPTER = DescriptorAdapter()
BULK_ADAPTER = BulkDescriptorAdapter()


__all__ = ["ADAPTER", "BULK_ADAPTER", "BulkDescriptorAdapter", "DescriptorAdapter"]
