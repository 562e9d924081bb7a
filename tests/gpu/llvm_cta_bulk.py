"""Tensor maps built on the device and bulk tensor copies (TMA) for the CTA simulator
(llvm_cta.py), from the PTX ISA.

- A map is built in shared memory by ``tensormap.replace.tile.<field>`` (the fields by
  name: the simulation keeps them beside the bytes, not in CUDA's opaque encoding), copied
  to global memory by ``tensormap.cp_fenceproxy`` and named there by its address.
- ``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes``
  reads a box: ``box_dim[d]`` elements along dimension ``d`` (0 innermost) from the
  coordinates given, ``global_stride`` bytes between rows, elements outside
  ``global_dim`` filled with zeros (``fill_mode`` 0) or NaN (1).  The global bytes are
  read when the copy is issued; they land in shared memory, row-major with 16-byte
  chunks swizzled as wgmma reads them (``address ^ ((address >> 7) & (S / 16 - 1)) <<
  4`` for a swizzle of S bytes), when a wait on the barrier lets them, and complete
  their bytes of the phase's transaction count (``mbarrier.arrive.expect_tx`` arrives
  and expects them).  They are written through the async proxy: wgmma reads them with no
  proxy fence.  Reading them before the phase completes is reported (the bytes are in
  flight, as a cp.async's).
- ``cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`` writes a box out: the
  async proxy reads shared memory when it is issued (what the issuing thread is ordered
  after, and fenced: generic writes need a ``fence.proxy.async`` first) and writes the
  elements inside ``global_dim``; until the issuing thread's ``cp.async.bulk.wait_group
  .read`` the source bytes are still being read, and writing them is reported.
- A thread copies through a map only after its own ``fence.proxy.tensormap`` acquire of
  it, ordered after the map was written; a bulk copy completes on an mbarrier only after
  a ``fence.mbarrier_init`` showed its ``init`` to the async proxy.  The maps' other
  fields (element strides, interleave, the swizzle's width against the box) are checked
  to be what the simulation models.

Host descriptors (a map encoded by the driver and passed as a kernel parameter) are not
simulated: their encoding is CUDA's, opaque here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .llvm_cta import ASYNC_PROXY, CTA, SimulationError

_REPLACE = re.compile(r"tensormap\.replace\.tile\.(\w+)\.shared::cta\.b1024\.b(?:32|64) \[\$0\], (?:(\d+), )?(\$2|-?\d+);")
_LOAD = re.compile(r"cp\.async\.bulk\.tensor\.(\d)d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes")
_STORE = re.compile(r"cp(\.reduce)?\.async\.bulk\.tensor\.(\d)d\.global\.shared::cta")
#: A tensor map's bytes.
MAP_BYTES = 128
#: ``tensormap.replace`` element type -> (bytes, the NaN pattern of a float type or None).
_ELEMENTS = {0: (1, None), 1: (2, None), 2: (4, None), 3: (4, None), 4: (8, None), 5: (8, None),
             6: (2, 0x7E00), 7: (4, 0x7FC00000), 9: (8, 0x7FF8000000000000), 10: (2, 0x7FC0)}


@dataclass
class TensorMap:
    fields: dict = field(default_factory=dict)   # name -> value, or {ordinal: value}
    #: In global memory: the thread that copied it there and its clock then.
    written: tuple = (-1, 0)

    def get(self, name: str, ordinal: int | None = None) -> int:
        value = self.fields.get(name)
        if ordinal is not None:
            value = None if value is None else value.get(ordinal)
        if value is None:
            raise SimulationError(f"a bulk copy uses a tensor map whose {name}"
                                  f"{'' if ordinal is None else f'[{ordinal}]'} was never set")
        return value


def _maps(cta: CTA, where: str) -> dict:
    return cta.__dict__.setdefault("tensormaps", {}).setdefault(where, {})


def bulk_step(cta: CTA, text: str, args: list, tid: int) -> None:
    """One thread's tensor-map edit, copy, fence or bulk copy (inline asm ``text``)."""
    memory = cta.memory
    if "st.shared.b32 [$0], 0;" in text:  # zeros under a map being built: its fields start over
        if args[1]:
            memory.store(3, args[0], bytes(4), tid)
            built = _maps(cta, "shared")
            for start in [m for m in built if m <= args[0] < m + MAP_BYTES]:
                del built[start]
        return None
    replace = _REPLACE.search(text)
    if replace:
        if args[1]:
            name, ordinal, value = replace.group(1), replace.group(2), replace.group(3)
            value = args[2] if value == "$2" else int(value)
            fields = _maps(cta, "shared").setdefault(args[0], TensorMap()).fields
            if ordinal is None:
                fields[name] = value
            else:
                fields.setdefault(name, {})[int(ordinal)] = value
        return None
    if "tensormap.cp_fenceproxy" in text:
        if args[2]:
            built = _maps(cta, "shared").get(args[1])
            if built is None:
                raise SimulationError(f"thread {tid} copies a tensor map from shared {args[1]} where none was built")
            _maps(cta, "global")[args[0]] = TensorMap(dict(built.fields), (tid, memory.now(tid)))
        return None
    if "fence.proxy.tensormap::generic.acquire" in text:
        # This thread's copies through the map at $0 see what was written there, if the
        # write is ordered before this acquire.
        found = _maps(cta, "global").get(args[0])
        if found is not None and memory.ordered(tid, *found.written):
            _acquired(cta)[(tid, args[0])] = found
        return None
    if "cp.async.bulk.wait_group" in text:  # the copies out so far have read shared memory
        if args[0]:
            for a in [a for a, who in memory.bulk_reading.items() if who == tid]:
                del memory.bulk_reading[a]
        return None
    if "prefetch.tensormap" in text or "cp.async.bulk.commit_group" in text:
        return None  # a hint; a group the copies out already form
    load = _LOAD.search(text)
    if load:
        rank = int(load.group(1))
        if args[3 + rank]:
            _copy_in(cta, tid, args[0], args[1], args[2:2 + rank], args[2 + rank])
        return None
    store = _STORE.search(text)
    if store:
        if store.group(1):
            raise SimulationError(f"the simulator does not model bulk reductions: '{text}'")
        rank = int(store.group(2))
        if args[2 + rank]:
            _copy_out(cta, tid, args[0], args[1:1 + rank], args[1 + rank])
        return None
    raise SimulationError(f"the simulator does not know the asm '{text}'")


def _acquired(cta: CTA) -> dict:
    return cta.__dict__.setdefault("tensormaps", {}).setdefault("acquired", {})


def _map_at(cta: CTA, address: int, tid: int) -> TensorMap:
    found = _maps(cta, "global").get(address)
    if found is None:
        raise SimulationError(f"thread {tid} copies through a tensor map at {address:#x} that no thread wrote "
                              "(tensormap.cp_fenceproxy) there")
    if _acquired(cta).get((tid, address)) is not found:
        raise SimulationError(f"thread {tid} copies through the tensor map at {address:#x} with no "
                              "fence.proxy.tensormap acquire of it after it was written")
    _check_map(found)
    return found


def _check_map(found: TensorMap) -> None:
    """Only what the simulation models: every other value is reported, not ignored."""
    rank = found.get("rank") + 1
    if found.get("elemtype") not in _ELEMENTS:
        raise SimulationError(f"a tensor map of element type {found.get('elemtype')}, which the simulator does not "
                              "model")
    if found.fields.get("interleave_layout", 0) != 0:
        raise SimulationError("a tensor map with an interleaved layout, which the simulator does not model")
    for d in range(rank):
        if found.fields.get("element_stride", {}).get(d, 1) != 1:
            raise SimulationError(f"a tensor map with element_stride[{d}] = {found.get('element_stride', d)}, which "
                                  "the simulator does not model")
    mode = found.get("swizzle_mode")
    size = _ELEMENTS[found.get("elemtype")][0]
    if mode and found.get("box_dim", 0) * size > 16 << mode:
        raise SimulationError(f"a tensor map whose inner box row ({found.get('box_dim', 0) * size} bytes) is wider "
                              f"than its swizzle ({16 << mode} bytes): the PTX ISA does not allow it")


def _box(found: TensorMap, coords: list) -> tuple:
    """(element bytes, NaN pattern, [(box index tuple, global byte address or None)])."""
    rank = found.get("rank") + 1
    size, nan = _ELEMENTS[found.get("elemtype")]
    box = [found.get("box_dim", d) for d in range(rank)]
    dims = [found.get("global_dim", d) for d in range(rank)]
    strides = [size] + [found.get("global_stride", d) for d in range(rank - 1)]
    base = found.get("global_address")
    places = []

    def walk(d: int, index: tuple, address: int, inside: bool) -> None:
        if d < 0:
            places.append((index, address if inside else None))
            return
        for i in range(box[d]):
            c = _signed32(coords[d]) + i
            walk(d - 1, index + (i,), address + c * strides[d], inside and 0 <= c < dims[d])
    walk(rank - 1, (), base, True)
    return size, nan, box, places


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >> 31 else value


def _shared_offset(found: TensorMap, box: list, index: tuple, size: int) -> int:
    """Where element ``index`` (outermost first) of the box lands, before the swizzle."""
    offset = 0
    for d, i in zip(range(len(box) - 1, -1, -1), index):
        offset = offset * box[d] + i
    return offset * size


def _swizzled(found: TensorMap, address: int) -> int:
    mode = found.get("swizzle_mode")
    if not mode:
        return address
    span = 16 << mode  # 32, 64 or 128 bytes
    return address ^ (((address >> 7) & (span // 16 - 1)) << 4)


def _copy_in(cta: CTA, tid: int, shared: int, map_address: int, coords: list, barrier_address: int) -> None:
    from .llvm_cta_mbarrier import expect_transfer
    from .llvm_cta_wgmma import in_flight_reader

    found = _map_at(cta, map_address, tid)
    size, nan, box, places = _box(found, coords)
    if shared % 128:
        raise SimulationError(f"thread {tid}: a bulk tensor copy into shared {shared:#x}, not 128-byte aligned")
    memory = cta.memory
    fill = (nan if found.get("fill_mode") == 1 and nan is not None else 0).to_bytes(size, "little")
    pieces = []
    for index, address in places:
        data = memory.load(1, address, size, tid) if address is not None else fill
        pieces.append((_swizzled(found, shared + _shared_offset(found, box, index, size)), data))
    total = len(pieces) * size
    reader = in_flight_reader(cta, shared, total)
    if reader is not None:
        raise SimulationError(f"thread {tid} starts a bulk copy into shared bytes {shared}..{shared + total - 1}, which "
                              f"an in-flight wgmma.mma_async of warpgroup {reader} reads")
    for a in range(shared, shared + total):
        owner = memory.unordered_reader(a, tid)
        if owner is not None:
            raise SimulationError(f"thread {tid} starts a bulk copy into shared byte {a} that thread {owner} read "
                                  "since the last barrier (or mbarrier phase) between them")
    memory._check_async(shared, total, tid, "starts a bulk copy into")
    memory.in_flight.update(dict.fromkeys(range(shared, shared + total), tid))
    expect_transfer(cta, tid, barrier_address, pieces, total)


def _copy_out(cta: CTA, tid: int, map_address: int, coords: list, shared: int) -> None:
    found = _map_at(cta, map_address, tid)
    size, _, box, places = _box(found, coords)
    memory = cta.memory
    memory.async_view = (memory.clocks[tid].copy(), tid)
    try:
        for index, address in places:
            source = _swizzled(found, shared + _shared_offset(found, box, index, size))
            data = memory.load(3, source, size, ASYNC_PROXY)
            memory.bulk_reading.update(dict.fromkeys(range(source, source + size), tid))
            if address is not None:
                memory.store(1, address, data, tid)
    finally:
        memory.async_view = None


__all__ = ["TensorMap", "bulk_step"]
