"""A simulated flat address space over the NumPy arrays a kernel is launched with.

Buffer ``k`` (the k-th pointer argument, counted from 0) lives at the fake base address
``(k + 1) << 40``, so address 0 stays the null pointer and every buffer owns a window of
one TiB around its base: ``[base - 2**39, base + 2**39)``.  A pointer value is an int64
byte address; ``tile.addptr`` adds ``offset * element size``.  An access maps each
address back to its buffer (the window it falls in) and to an element index, checks it,
and reads or writes the array in place.

Accesses through a pointer whose element type differs from the array's dtype (a pointer
bitcast) reinterpret the array's bytes, as the hardware would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

#: log2 of the distance between two buffers' base addresses.
ADDRESS_SHIFT = 40
_HALF_WINDOW = 1 << (ADDRESS_SHIFT - 1)


@dataclass
class Buffer:
    """One pointer argument: its array (flat, in memory order), its name and base address."""

    index: int
    name: str
    array: np.ndarray  # the user's array, kept for messages
    flat: np.ndarray  # a 1-D view of the same memory
    base: int
    _views: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def nbytes(self) -> int:
        return self.flat.nbytes

    def view(self, dtype: np.dtype) -> np.ndarray:
        """The buffer's memory as a 1-D array of ``dtype`` (trailing bytes that do not
        make a whole element are left out)."""
        dtype = np.dtype(dtype)
        if dtype == self.flat.dtype:
            return self.flat
        found = self._views.get(dtype)
        if found is None:
            raw = self.flat.view(np.uint8)
            usable = (raw.size // dtype.itemsize) * dtype.itemsize
            found = raw[:usable].view(dtype)
            self._views[dtype] = found
        return found

    def describe(self) -> str:
        if self.array.size != self.flat.size:  # a strided view: its elements lie among others
            return (f"argument '{self.name}' (a strided view of shape {tuple(self.array.shape)} whose elements "
                    f"span {self.flat.size} elements of {self.flat.dtype} in memory)")
        return f"argument '{self.name}' ({self.flat.size} elements of {self.flat.dtype})"


def flat_view(array: np.ndarray) -> np.ndarray | None:
    """A 1-D view of ``array`` in memory order, or None when its memory is not one block."""
    if array.flags.c_contiguous:
        return array.reshape(-1)
    if array.flags.f_contiguous:
        return array.T.reshape(-1)
    return None


class _Bytes:
    """``__array_interface__`` of ``size`` bytes at ``address``, keeping ``owner`` (the
    array whose memory they are) alive as long as a view of them lives."""

    def __init__(self, address: int, size: int, writable: bool, owner: np.ndarray) -> None:
        self.owner = owner
        self.__array_interface__ = {"version": 3, "shape": (size,), "typestr": "|u1",
                                    "data": (address, not writable)}


def memory_span(array: np.ndarray) -> tuple[np.ndarray, int]:
    """The memory ``array``'s elements lie in, as a 1-D view of its dtype from its lowest
    element to its highest, and the byte offset of its first element (``array[0, ...]``)
    in it: what a kernel's pointer to a strided view (``x[:, 1:]``, ``t.T``, ``x[::-1]``)
    addresses with the strides it is given, as on a GPU.  Bytes between the elements (a
    slice's skipped columns) are part of the span: the view's own writes land in place.
    ValueError for strides that are not whole elements (a pointer cannot address them)."""
    flat = flat_view(array)
    if flat is not None:
        return flat, 0
    size = array.itemsize
    broken = [s for s in array.strides if s % size]
    if broken:
        raise ValueError(f"its strides {array.strides} (bytes) are not whole elements of {size} bytes")
    low = sum(s * (n - 1) for s, n in zip(array.strides, array.shape) if s < 0)
    high = sum(s * (n - 1) for s, n in zip(array.strides, array.shape) if s > 0) + size
    start = array.__array_interface__["data"][0] + low
    span = np.asarray(_Bytes(start, high - low, bool(array.flags.writeable), array))
    return span.view(array.dtype), -low


@dataclass
class AccessProblem:
    """The first bad lane of an access, for the error message."""

    lane: int
    address: int
    message: str


@dataclass
class Access:
    """Where the active lanes of one load, store or atomic go.

    ``groups`` holds, for each buffer touched, the buffer, the positions of its lanes in
    the flattened tile (``lanes``) and the element indices they address (``indices``).
    """

    groups: list[tuple[Buffer, np.ndarray, np.ndarray]]
    problem: AccessProblem | None = None

    def __iter__(self) -> Iterator[tuple[Buffer, np.ndarray, np.ndarray]]:
        return iter(self.groups)


class Memory:
    """The buffers of one launch."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []

    def add(self, array: np.ndarray, name: str) -> int:
        """Register ``array``'s memory (:func:`memory_span`) and return the address of its
        first element; ValueError for strides that are not whole elements."""
        flat, offset = memory_span(array)
        index = len(self.buffers)
        base = (index + 1) << ADDRESS_SHIFT
        self.buffers.append(Buffer(index, name, array, flat, base))
        return base + offset

    def buffer_at(self, address: int) -> Buffer | None:
        slot = ((address + _HALF_WINDOW) >> ADDRESS_SHIFT) - 1
        return self.buffers[slot] if 0 <= slot < len(self.buffers) else None

    def locate(self, addresses: np.ndarray, itemsize: int, lanes: np.ndarray, check: bool) -> Access:
        """Map ``addresses`` (int64, one per active lane; ``lanes`` are their positions)
        to buffers and indices of elements of ``itemsize`` bytes.

        With ``check``, the first lane that points outside every buffer, is misaligned or
        falls outside its buffer is reported in ``Access.problem`` (and the access should
        not be made).  Without, such lanes are dropped: they behave as masked off.
        """
        addresses = addresses.astype(np.int64, copy=False)
        fast = self._locate_in_one_buffer(addresses, itemsize, lanes)
        if fast is not None:
            return fast
        slots = ((addresses + _HALF_WINDOW) >> ADDRESS_SHIFT) - 1
        groups: list[tuple[Buffer, np.ndarray, np.ndarray]] = []
        problem: AccessProblem | None = None
        bad_outside = (slots < 0) | (slots >= len(self.buffers))
        if bad_outside.any():
            first = int(np.argmax(bad_outside))
            address = int(addresses[first])
            what = "the null pointer" if address == 0 else f"address {address:#x}"
            problem = AccessProblem(int(lanes[first]), address,
                                    f"accesses {what}, which is not inside any argument array")
        inside = slots[~bad_outside]
        if inside.size and inside.min() == inside.max():
            touched = inside[:1]  # the usual case: every lane points into one array
        else:
            touched = np.unique(inside)
        for slot in touched:
            buffer = self.buffers[int(slot)]
            if touched.size == 1 and inside.size == slots.size:
                offsets, its_lanes = addresses - buffer.base, lanes
            else:
                chosen = slots == slot
                offsets, its_lanes = addresses[chosen] - buffer.base, lanes[chosen]
            indices = offsets // itemsize
            size = buffer.nbytes // itemsize
            misaligned = (offsets % itemsize) != 0
            outside = (indices < 0) | (indices >= size)
            bad = misaligned | outside
            if bad.any():
                first = int(np.argmax(bad))
                if problem is None or its_lanes[first] < problem.lane:
                    if misaligned[first]:
                        message = (f"accesses byte offset {int(offsets[first])} of {buffer.describe()}, which is "
                                   f"not aligned to the {itemsize}-byte element size")
                    else:
                        message = (f"accesses index {int(indices[first])}, out of bounds of {buffer.describe()}"
                                   + ("" if itemsize == buffer.flat.itemsize
                                      else f", which holds {size} elements of {itemsize} bytes"))
                    problem = AccessProblem(int(its_lanes[first]), int(offsets[first]) + buffer.base, message)
                keep = ~bad
                its_lanes, indices = its_lanes[keep], indices[keep]
            if its_lanes.size:
                groups.append((buffer, its_lanes, indices))
        if not check:
            problem = None
        return Access(groups, problem)

    def _locate_in_one_buffer(self, addresses: np.ndarray, itemsize: int, lanes: np.ndarray) -> Access | None:
        """The usual access, every lane aligned and inside one buffer, in a few passes
        over the lanes (whole-grid batches make them long); None for anything else."""
        if not addresses.size or itemsize & (itemsize - 1):
            return None
        low, high = int(addresses.min()), int(addresses.max())
        buffer = self.buffer_at(low)
        if buffer is None or not (buffer.base <= low and high + itemsize <= buffer.base + buffer.nbytes):
            return None
        offsets = addresses - buffer.base
        if itemsize > 1 and (offsets & (itemsize - 1)).any():
            return None
        return Access([(buffer, lanes, offsets >> (itemsize.bit_length() - 1))])


def serialized_update(view: np.ndarray, indices: np.ndarray, combine: Callable[..., np.ndarray],
                      *operands: np.ndarray) -> np.ndarray:
    """Apply ``memory = combine(memory, *operands)`` at ``indices`` lane after lane.

    Lanes that address the same element are serialized in lane order, so every lane's
    update is kept and each lane gets the value it found (the old value), like atomics on
    a GPU.  Lanes are processed in rounds: round ``r`` takes the ``r``-th lane of every
    address, so each round is one vectorized read-modify-write.  Returns the old values.
    """
    count = indices.size
    old = np.empty(count, dtype=view.dtype)
    if count == 0:
        return old
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    starts = np.ones(count, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    positions = np.arange(count)
    run_start = np.maximum.accumulate(np.where(starts, positions, 0))
    rank = np.empty(count, dtype=np.int64)
    rank[order] = positions - run_start
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.cumsum(np.bincount(rank))[:-1]
    for lanes in np.split(by_rank, bounds):
        where = indices[lanes]
        current = view[where]
        old[lanes] = current
        view[where] = combine(current, *(o[lanes] for o in operands))
    return old
