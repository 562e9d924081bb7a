"""Run a lowered kernel's LLVM IR on Python integers: every thread of one CTA, in lock
step between barriers, with shared memory checked for out-of-bounds accesses, reads of
bytes nobody wrote and races between barriers.

The lowering's own simulations check each piece against its layout; this runs the whole
kernel as the hardware would (one block, NVIDIA: ``bar.sync``, ``ldmatrix``, ``mma.sync``
and ``shfl.sync`` done per warp from the PTX ISA's tables), so a piece that is right alone
but wrong next to another (an offset two conversions share, a missing barrier, registers
handed over in the wrong order) shows up as a wrong result here, without a GPU.

It covers the instructions the GPU lowering emits for straight-line kernels (branches and
phis included), not LLVM in general: an instruction it does not know is an error.  AMD's
intrinsics (ids, ``s_barrier``, DPP, ``ds_swizzle``, ``ds_bpermute``, MFMA, WMMA) are
simulated in llvm_cta_amdgpu.py; run AMD kernels with ``warp_size=64`` on CDNA.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
import numpy as np


class SimulationError(AssertionError):
    """The kernel did something a GPU would not do reliably (or the simulator cannot)."""


_FLOATS = {"half": np.float16, "float": np.float32, "double": np.float64}
_SIZES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "half": 2, "bfloat": 2, "float": 4, "double": 8}


def _size(ty: str) -> int:
    ty = ty.strip()
    if ty in _SIZES:
        return _SIZES[ty]
    if ty.startswith("ptr"):
        return 8
    m = re.fullmatch(r"[<\[](\d+) x (.+)[>\]]", ty)
    if m:
        return int(m.group(1)) * _size(m.group(2))
    raise SimulationError(f"size of {ty}")


def _element(ty: str) -> str:
    m = re.fullmatch(r"[<\[](\d+) x (.+)[>\]]", ty.strip())
    return m.group(2) if m else ty


def _bits(ty: str) -> int:
    return int(ty[1:])


def _pack(ty: str, value: Any) -> bytes:
    if ty in _FLOATS:
        return np.array(value, _FLOATS[ty]).tobytes()
    if ty == "bfloat":
        return struct.pack("<H", value)
    if ty.startswith("ptr"):
        return struct.pack("<Q", value)
    return (value & ((1 << (8 * _size(ty))) - 1)).to_bytes(_size(ty), "little")


def _unpack(ty: str, data: bytes) -> Any:
    if ty in _FLOATS:
        return np.frombuffer(data, _FLOATS[ty])[0]
    return int.from_bytes(data, "little") & ((1 << (_bits(ty) if ty.startswith("i") else 64)) - 1)


def _to_bits(ty: str, value: Any) -> int:
    return int.from_bytes(_pack(ty, value), "little")


def _from_bits(ty: str, value: int) -> Any:
    return _unpack(ty, value.to_bytes(_size(ty), "little"))


def _constant(ty: str, text: str) -> Any:
    text = text.strip()
    if text in ("zeroinitializer", "undef", "poison"):
        if ty.startswith("<"):
            n = int(ty[1:].split(" x ")[0])
            return [_constant(_element(ty), "0" if _element(ty)[0] == "i" else "0.0") for _ in range(n)]
        return _constant(ty, "0" if ty[0] == "i" else "0.0")
    if ty.startswith("<"):
        items = re.findall(r"(\w+) ([^,>]+)", text[1:-1])
        return [_constant(t, v) for t, v in items]
    if ty == "i1":
        return {"true": 1, "false": 0}[text] if text in ("true", "false") else int(text) & 1
    if ty.startswith("i"):
        return int(text) & ((1 << _bits(ty)) - 1)
    if ty in _FLOATS:
        if text.startswith("0x"):
            # LLVM writes float and half constants as the bits of a double (0xH for half).
            if text.startswith("0xH"):
                return np.frombuffer(int(text[3:], 16).to_bytes(2, "little"), np.float16)[0]
            return _FLOATS[ty](struct.unpack("<d", int(text, 16).to_bytes(8, "little"))[0])
        return _FLOATS[ty](float(text))
    if ty.startswith("ptr") and text == "null":
        return 0
    if ty == "bfloat":  # a bfloat value is its 16 bits here; LLVM writes them as 0xR....
        return int(text[3:], 16) if text.startswith("0xR") else _bfloat_bits(float(text))
    raise SimulationError(f"constant {ty} {text}")


@dataclass
class _Op:
    opcode: str
    name: str
    type: str
    operands: list  # ("v", name) | ("c", value) | ("b", block name)
    types: list
    text: str


def _decode(function: Any, globals_: dict[str, int]) -> dict[str, list[_Op]]:
    blocks: dict[str, list[_Op]] = {}
    for block in function.blocks:
        ops = []
        for ins in block.instructions:
            operands, types = [], []
            for o in ins.operands:
                kind = o.value_kind.name
                types.append(str(o.type))
                if kind in ("instruction", "argument"):
                    operands.append(("v", o.name))
                elif kind == "basic_block":
                    operands.append(("b", o.name))
                elif kind == "global_variable":
                    operands.append(("c", globals_[o.name]))
                elif kind in ("function", "inline_asm"):
                    operands.append(("f", str(o)))
                else:
                    text = str(o)
                    ty = str(o.type)
                    operands.append(("c", _constant(ty, text[len(ty):])))
            ops.append(_Op(ins.opcode, ins.name, str(ins.type), operands, types, str(ins).strip()))
        blocks[block.name] = ops
    return blocks


#: The thread number the async proxy (wgmma's operand reads) uses with :class:`Memory`.
ASYNC_PROXY = -1


@dataclass
class Memory:
    """A flat byte array per address space; shared bytes remember who wrote them when."""

    data: dict[int, bytearray] = field(default_factory=dict)
    writer: dict[int, tuple[int, int]] = field(default_factory=dict)   # shared byte -> (epoch, thread)
    readers: dict[int, tuple[int, set]] = field(default_factory=dict)  # shared byte -> (epoch, threads)
    epoch: int = 0
    #: Shared bytes a cp.async is still writing -> the copying thread (llvm_cta_async.py).
    in_flight: dict[int, int] = field(default_factory=dict)
    #: Shared bytes of live mbarriers (llvm_cta_mbarrier.py).
    live_barriers: set = field(default_factory=set)
    #: Shared bytes written through the generic proxy (a store, a cp.async landing) ->
    #: the writing thread, until that thread's next ``fence.proxy.async``: the async
    #: proxy (wgmma) must not read them before (llvm_cta_wgmma.py).
    unfenced: dict[int, int] = field(default_factory=dict)

    def _check_async(self, address: int, size: int, thread: int, access: str) -> None:
        for a in range(address, address + size):
            if a in self.in_flight:
                raise SimulationError(f"thread {thread} {access} shared byte {a}, which a cp.async of thread "
                                      f"{self.in_flight[a]} is still writing (no wait for it has returned)")
            if a in self.live_barriers:
                raise SimulationError(f"thread {thread} {access} shared byte {a} of a live mbarrier")

    def load(self, space: int, address: int, size: int, thread: int) -> bytes:
        buf = self.data[space]
        if address < 0 or address + size > len(buf):
            raise SimulationError(f"thread {thread}: {size}-byte load at {address:#x} outside address space {space} "
                                  f"({len(buf)} bytes)")
        if space == 3:
            if self.in_flight or self.live_barriers:
                self._check_async(address, size, thread, "reads")
            if thread == ASYNC_PROXY:
                self._check_proxy_fence(address, size)
            for a in range(address, address + size):
                if a not in self.writer:
                    raise SimulationError(f"thread {thread} reads shared byte {a} that no thread wrote")
                epoch, who = self.writer[a]
                if epoch == self.epoch and who != thread:
                    raise SimulationError(f"thread {thread} reads shared byte {a} that thread {who} wrote since "
                                          "the last barrier")
                e, threads = self.readers.get(a, (self.epoch, set()))
                if e != self.epoch:
                    threads = set()
                threads.add(thread)
                self.readers[a] = (self.epoch, threads)
        return bytes(buf[address:address + size])

    def store(self, space: int, address: int, data: bytes, thread: int) -> None:
        buf = self.data[space]
        if address < 0 or address + len(data) > len(buf):
            raise SimulationError(f"thread {thread}: {len(data)}-byte store at {address:#x} outside address space "
                                  f"{space} ({len(buf)} bytes)")
        if space == 3:
            if self.in_flight or self.live_barriers:
                self._check_async(address, len(data), thread, "writes")
            for a in range(address, address + len(data)):
                epoch, who = self.writer.get(a, (-1, thread))
                if epoch == self.epoch and who != thread and bytes(buf[a:a + 1]) != data[a - address:a - address + 1]:
                    raise SimulationError(f"threads {who} and {thread} write different values to shared byte {a} "
                                          "between two barriers")
                e, threads = self.readers.get(a, (-1, set()))
                if e == self.epoch and threads - {thread}:
                    raise SimulationError(f"thread {thread} overwrites shared byte {a} that thread "
                                          f"{min(threads - {thread})} read since the last barrier")
                self.writer[a] = (self.epoch, thread)
                self.unfenced[a] = thread
        buf[address:address + len(data)] = data

    def _check_proxy_fence(self, address: int, size: int) -> None:
        for a in range(address, address + size):
            if a in self.unfenced:
                raise SimulationError(f"the async proxy (wgmma) reads shared byte {a}, which thread "
                                      f"{self.unfenced[a]} wrote through the generic proxy (a store or a cp.async) "
                                      "with no fence.proxy.async after the write")

    def fence_proxy_async(self, thread: int) -> None:
        """``fence.proxy.async`` by ``thread``: its generic-proxy writes so far (its stores,
        its cp.async copies that landed) are ordered before later async-proxy reads."""
        for a in [a for a, who in self.unfenced.items() if who == thread]:
            del self.unfenced[a]


def _space(ptr_type: str) -> int:
    m = re.search(r"addrspace\((\d+)\)", ptr_type)
    return int(m.group(1)) if m else 0


def _gep_offset(op: _Op, indices: list) -> int:
    m = re.match(r"(?:%\S+ = )?getelementptr (?:inbounds )?(?:nuw )?(?:nusw )?(.+?), ptr", op.text)
    ty = m.group(1)
    offset = _signed(indices[0], op.types[1]) * _size(ty)
    for index, index_type in zip(indices[1:], op.types[2:]):
        ty = _element(ty)
        offset += _signed(index, index_type) * _size(ty)
    return offset


def _signed(value: int, ty: str) -> int:
    bits = _bits(ty)
    return value - (1 << bits) if value >> (bits - 1) else value


_ICMP = {
    "eq": lambda a, b, s: a == b, "ne": lambda a, b, s: a != b,
    "slt": lambda a, b, s: s(a) < s(b), "sle": lambda a, b, s: s(a) <= s(b),
    "sgt": lambda a, b, s: s(a) > s(b), "sge": lambda a, b, s: s(a) >= s(b),
    "ult": lambda a, b, s: a < b, "ule": lambda a, b, s: a <= b, "ugt": lambda a, b, s: a > b, "uge": lambda a, b, s: a >= b,
}
_FCMP = {"oeq": np.equal, "one": np.not_equal, "olt": np.less, "ole": np.less_equal, "ogt": np.greater,
         "oge": np.greater_equal, "une": np.not_equal, "ueq": np.equal, "ult": np.less, "ule": np.less_equal,
         "ugt": np.greater, "uge": np.greater_equal}
_INT_BINARY = {
    "add": lambda a, b, n: a + b, "sub": lambda a, b, n: a - b, "mul": lambda a, b, n: a * b,
    "and": lambda a, b, n: a & b, "or": lambda a, b, n: a | b, "xor": lambda a, b, n: a ^ b,
    "shl": lambda a, b, n: a << b, "lshr": lambda a, b, n: a >> b,
    "ashr": lambda a, b, n: (a - ((a >> (n - 1)) << n)) >> b,
    "udiv": lambda a, b, n: a // b, "urem": lambda a, b, n: a % b,
    "sdiv": lambda a, b, n: int(np.trunc(_s(a, n) / _s(b, n))), "srem": lambda a, b, n: int(np.fmod(_s(a, n), _s(b, n))),
}
_FLOAT_BINARY = {"fadd": np.add, "fsub": np.subtract, "fmul": np.multiply, "fdiv": np.divide}


def _s(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def _lanewise(fn, ty: str, *args):
    if ty.startswith("<"):
        return [fn(_element(ty), *xs) for xs in zip(*args)]
    return fn(ty, *args)


@dataclass
class Collective:
    """A warp- or block-wide step: every thread waits here with its inputs."""

    kind: str       # "barrier" | asm text | shuffle intrinsic
    inputs: list


class CTA:
    """One block of ``num_warps`` warps running ``function`` of ``llvm_ir``."""

    def __init__(self, llvm_ir: str, kernel: str, num_warps: int, shared_bytes: int, warp_size: int = 32):
        self.module = llvm.parse_assembly(llvm_ir)
        self.function = self.module.get_function(kernel)
        self.num_warps, self.warp_size = num_warps, warp_size
        self.memory = Memory()
        self.memory.data[3] = bytearray(shared_bytes)
        self.memory.data[1] = bytearray()
        shared = {g.name: 0 for g in self.module.global_variables}
        self.blocks = _decode(self.function, shared)
        self.entry = next(iter(self.blocks))

    def buffer(self, array: np.ndarray) -> int:
        """Place ``array`` in global memory; returns its address (a pointer argument)."""
        buf = self.memory.data[1]
        address = (len(buf) + 255) // 256 * 256 + 256
        buf.extend(bytes(address + array.nbytes - len(buf)))
        buf[address:address + array.nbytes] = np.ascontiguousarray(array).tobytes()
        return address

    def read(self, address: int, like: np.ndarray) -> np.ndarray:
        data = bytes(self.memory.data[1][address:address + like.nbytes])
        return np.frombuffer(data, like.dtype).reshape(like.shape).copy()

    def run(self, args: list) -> None:
        names = [a.name for a in self.function.arguments]
        threads = [self._thread(tid, dict(zip(names, args))) for tid in range(self.num_warps * self.warp_size)]
        pending = [next(t, None) for t in threads]
        while any(p is not None for p in pending):
            if any(p is None for p in pending):
                raise SimulationError("some threads returned while others wait at a collective step")
            kinds = {p.kind for p in pending}
            if len(kinds) != 1:
                raise SimulationError(f"threads wait at different collective steps: {sorted(kinds)[:3]}")
            kind = kinds.pop()
            results = self._collective(kind, pending)
            pending = [_resume(t, r) for t, r in zip(threads, results)]

    def _collective(self, kind: str, pending: list[Collective]) -> list:
        if kind == "barrier":
            self.memory.epoch += 1
            return [None] * len(pending)
        results: list = [None] * len(pending)
        if "mbarrier.try_wait" in kind:
            from .llvm_cta_mbarrier import mbarrier_wait_step

            return mbarrier_wait_step(self, [p.inputs for p in pending])
        if "wgmma.mma_async" in kind:
            from .llvm_cta_wgmma import warpgroup_step

            size = 4 * self.warp_size
            for group in range(self.num_warps // 4):
                lanes = pending[group * size:(group + 1) * size]
                results[group * size:(group + 1) * size] = warpgroup_step(self, kind, [p.inputs for p in lanes], group)
            return results
        for warp in range(self.num_warps):
            lanes = pending[warp * self.warp_size:(warp + 1) * self.warp_size]
            out = _WARP_STEPS[_step_name(kind)](self, kind, [p.inputs for p in lanes], warp)
            results[warp * self.warp_size:(warp + 1) * self.warp_size] = out
        return results

    def _thread(self, tid: int, values: dict):
        values = dict(values)
        block, previous = self.entry, None
        while True:
            jump, phis = None, {}
            for op in self.blocks[block]:
                code = op.opcode
                if code == "phi":  # every phi of a block reads the values from before it
                    labels = [label.strip('"') for label in re.findall(r"\[ [^,]+, %([^\s\]]+) \]", op.text)]
                    k, x = op.operands[labels.index(previous)]
                    phis[op.name] = values[x] if k == "v" else x
                    continue
                values.update(phis)
                phis = {}
                get = [values[x] if k == "v" else x for k, x in op.operands]
                if code == "br":
                    if len(get) == 1:
                        jump = get[0]
                    else:  # LLVM lists a conditional branch's operands as cond, false, true
                        jump = get[2] if get[0] else get[1]
                    break
                if code in ("ret", "unreachable"):
                    return
                if code == "call":
                    callee = op.operands[-1][1]
                    args = get[:-1]
                    result = yield from self._call(op, callee, args, tid)
                else:
                    result = self._compute(op, get, tid)
                if op.name:
                    values[op.name] = result
            previous, block = block, jump

    def _compute(self, op: _Op, get: list, tid: int) -> Any:
        code, ty = op.opcode, op.type
        if code in _INT_BINARY:
            fn = _INT_BINARY[code]
            return _lanewise(lambda t, a, b: fn(a, b, _bits(t)) & ((1 << _bits(t)) - 1), ty, get[0], get[1])
        if code in _FLOAT_BINARY:
            return _lanewise(lambda t, a, b: _FLOATS[t](_FLOAT_BINARY[code](a, b)), ty, get[0], get[1])
        if code == "fneg":
            return _lanewise(lambda t, a: -a, ty, get[0])
        if code == "icmp":
            pred = op.text.split("icmp ")[1].split()[0]
            bits = _bits(_element(op.types[0])) if op.types[0][0] in "i<" and "ptr" not in op.types[0] else 64
            return _lanewise(lambda t, a, b: int(_ICMP[pred](a, b, lambda v: _s(v, bits))), ty, get[0], get[1])
        if code == "fcmp":
            pred = op.text.split("fcmp ")[1].split()[0]
            return _lanewise(lambda t, a, b: int(bool(_FCMP[pred](a, b))), ty, get[0], get[1])
        if code == "select":
            if isinstance(get[0], list):
                return [x if c else y for c, x, y in zip(*get)]
            return get[1] if get[0] else get[2]
        if code == "getelementptr":
            return get[0] + _gep_offset(op, get[1:])
        if code == "load":
            return self._load(ty, _space(op.types[0]), get[0], tid)
        if code == "store":
            self._store(op.types[0], _space(op.types[1]), get[1], get[0], tid)
            return None
        if code == "insertelement":
            vec = list(get[0])
            vec[get[2]] = get[1]
            return vec
        if code == "extractelement":
            return get[0][get[1]]
        if code == "extractvalue":
            return get[0][int(op.text.rsplit(",", 1)[1])]
        if code == "shufflevector":
            mask = [int(x) for x in re.findall(r"i32 (\d+)", op.text.split(">, <")[-1])]
            both = list(get[0]) + list(get[1])
            return [both[i] for i in mask]
        if code in ("zext", "trunc"):
            return _lanewise(lambda t, a: a & ((1 << _bits(t)) - 1), ty, get[0])
        if code == "sext":
            src = _bits(_element(op.types[0]))
            return _lanewise(lambda t, a: _s(a, src) & ((1 << _bits(t)) - 1), ty, get[0])
        if code in ("fpext", "fptrunc"):
            source = _element(op.types[0])
            return _lanewise(lambda t, a: _convert_float(source, t, a), ty, get[0])
        if code in ("sitofp", "uitofp"):
            src = _bits(_element(op.types[0]))
            return _lanewise(lambda t, a: _FLOATS[t](_s(a, src) if code == "sitofp" else a), ty, get[0])
        if code in ("fptosi", "fptoui"):
            return _lanewise(lambda t, a: int(np.trunc(a)) & ((1 << _bits(t)) - 1), ty, get[0])
        if code == "bitcast":
            src = op.types[0]
            if src.startswith("ptr") or ty.startswith("ptr"):
                return get[0]
            if src.startswith("<") or ty.startswith("<"):
                raw = b"".join(_pack(_element(src), v) for v in get[0]) if src.startswith("<") else _pack(src, get[0])
                if ty.startswith("<"):
                    e = _element(ty)
                    return [_unpack(e, raw[i:i + _size(e)]) for i in range(0, len(raw), _size(e))]
                return _unpack(ty, raw)
            return _from_bits(ty, _to_bits(src, get[0]))
        if code in ("ptrtoint", "inttoptr", "addrspacecast", "freeze"):
            return get[0]
        if code == "fence":  # threads run in lock step: memory is always in order here
            return None
        raise SimulationError(f"the simulator does not know '{op.text}'")

    def _global_access(self, op: _Op, text: str, args: list, tid: int) -> Any:
        """A (predicated) global load or store in inline PTX, as the NVIDIA backend writes
        them: ``mov.bN $i, src;`` then ``@$p ld.global[...].vN.bW {$0...}, [$k];``, or
        ``@$p st.global[...].vN.bW [$0], {$1...};``."""
        constraints = re.findall(r'"([^"]*)"', op.text.split(" asm ", 1)[1])[1].split(",")
        outputs = [None] * sum(1 for c in constraints if c.startswith("="))

        def operand(spelled: str) -> Any:
            index = int(spelled.strip()[1:])
            return outputs[index] if index < len(outputs) else args[index - len(outputs)]

        for statement in text.replace("\\0A", " ").replace("\\09", " ").split(";"):
            statement = statement.strip()
            guard = re.match(r"@(\$\d+)\s+", statement)
            if guard:
                if not operand(guard.group(1)):
                    continue
                statement = statement[guard.end():]
            if not statement:
                continue
            if statement.startswith("mov."):
                target, source = statement.split(None, 1)[1].split(",")
                source = source.strip()
                outputs[int(target.strip()[1:])] = operand(source) if source.startswith("$") else int(source, 0)
                continue
            m = re.fullmatch(r"(ld|st)\.global\S*?\.b(\d+)\s+(.*)", statement)
            if m is None:
                raise SimulationError(f"the simulator does not know the PTX '{statement}'")
            word = "i" + m.group(2)
            names = re.findall(r"\$\d+", m.group(3))
            if m.group(1) == "ld":
                address = operand(names[-1])
                for i, name in enumerate(names[:-1]):
                    outputs[int(name[1:])] = self._load(word, 1, address + i * _size(word), tid)
            else:
                address = operand(names[0])
                for i, name in enumerate(names[1:]):
                    self._store(word, 1, address + i * _size(word), operand(name) & ((1 << _bits(word)) - 1), tid)
        if not outputs:
            return None
        return outputs if len(outputs) > 1 else outputs[0]

    def _load(self, ty: str, space: int, address: int, tid: int) -> Any:
        if ty.startswith("<"):
            e = _element(ty)
            data = self.memory.load(space, address, _size(ty), tid)
            return [_unpack(e, data[i:i + _size(e)]) for i in range(0, len(data), _size(e))]
        return _unpack(ty, self.memory.load(space, address, _size(ty), tid))

    def _store(self, ty: str, space: int, address: int, value: Any, tid: int) -> None:
        data = b"".join(_pack(_element(ty), v) for v in value) if ty.startswith("<") else _pack(ty, value)
        self.memory.store(space, address, data, tid)

    def _call(self, op: _Op, callee: str, args: list, tid: int):
        if callee.startswith("ptr asm") or " asm " in op.text:
            m = re.search(r'asm (?:sideeffect )?"([^"]*)"', op.text)
            text = m.group(1)
            if text.startswith("bar.sync"):
                yield Collective("barrier", [])
                return None
            trap = re.search(r"and\.b32 r, \$0, (\d+); setp\.ne\.u32 p, r, 0; @p trap;", text)
            if trap:  # the NVIDIA backend's shared-memory alignment check
                if args[0] & int(trap.group(1)):
                    raise SimulationError(f"thread {tid} traps: shared memory at {args[0]:#x} is not aligned "
                                          f"to {int(trap.group(1)) + 1} bytes")
                return None
            if text.startswith("cvt.rna.tf32.f32"):
                return _round_tf32(args[0])
            if "wgmma." in text or text.startswith("fence.proxy.async"):  # tests/gpu/llvm_cta_wgmma.py
                from .llvm_cta_wgmma import thread_step
                if "wgmma.mma_async" in text:  # the warpgroup's four warps together
                    result = yield Collective(text, args)
                    return result
                return thread_step(self, text, args, tid)
            if "mbarrier." in text:  # tests/gpu/llvm_cta_mbarrier.py
                from .llvm_cta_mbarrier import mbarrier_step
                if "mbarrier.try_wait" in text:  # every thread waits together
                    result = yield Collective(text, args)
                    return result
                return mbarrier_step(self, text, args, tid)
            if "cp.async" in text:  # per thread: tests/gpu/llvm_cta_async.py
                from .llvm_cta_async import async_copy_step
                return async_copy_step(self, text, args, tid)
            if "ld.global" in text or "st.global" in text:
                return self._global_access(op, text, args, tid)
            result = yield Collective(text, args)
            return result
        name = re.search(r"@\"?([\w.]+)", callee).group(1)
        if name == "llvm.nvvm.read.ptx.sreg.tid.x":
            return tid
        if name.startswith("llvm.nvvm.read.ptx.sreg.ctaid") or name.startswith("llvm.nvvm.read.ptx.sreg.tid."):
            return 0
        if name == "llvm.nvvm.read.ptx.sreg.ntid.x":
            return self.num_warps * self.warp_size
        if name.startswith(("llvm.nvvm.read.ptx.sreg.nctaid", "llvm.nvvm.read.ptx.sreg.ntid")):
            return 1  # one block of one dimension
        if name == "llvm.nvvm.barrier0" or name.startswith("llvm.nvvm.barrier.cta.sync"):
            yield Collective("barrier", [])
            return None
        if name.startswith("llvm.masked.load"):
            ptr, mask, other = args[0], args[-2], args[-1]  # LLVM 22 moved the alignment to an attribute
            e = _element(op.type)
            return [self._load(e, _space(op.types[0]), ptr + i * _size(e), tid) if m else o
                    for i, (m, o) in enumerate(zip(mask, other))]
        if name.startswith("llvm.masked.store"):
            value, ptr, mask = args[0], args[1], args[-1]
            e = _element(op.types[0])
            for i, (m, v) in enumerate(zip(mask, value)):
                if m:
                    self._store(e, _space(op.types[1]), ptr + i * _size(e), v, tid)
            return None
        if name.startswith(("llvm.smin.", "llvm.smax.", "llvm.umin.", "llvm.umax.")):
            pick = min if ".smin." in name or ".umin." in name else max
            signed = name.startswith(("llvm.smin.", "llvm.smax."))

            def extreme(t: str, a: int, b: int) -> int:
                bits = _bits(t)
                a, b = a & ((1 << bits) - 1), b & ((1 << bits) - 1)
                if signed:
                    return pick(_s(a, bits), _s(b, bits)) & ((1 << bits) - 1)
                return pick(a, b)
            return _lanewise(extreme, op.type, *args)
        if name.startswith("llvm.fmuladd") or name.startswith("llvm.fma."):
            dtype = _FLOATS[_element(op.type)]
            return _lanewise(lambda t, a, b, c: dtype(np.float64(a) * np.float64(b) + np.float64(c)), op.type, *args)
        if name.startswith("llvm.nvvm.shfl.sync"):
            result = yield Collective(name, args)
            return result
        if name.startswith("llvm.amdgcn."):
            from .llvm_cta_amdgpu import amdgpu_call  # AMD's semantics, in a module of their own

            result = yield from amdgpu_call(self, op, name, args, tid)
            return result
        raise SimulationError(f"the simulator does not know the call in '{op.text}'")


def _resume(thread, value):
    try:
        return thread.send(value)
    except StopIteration:
        return None


def _bfloat_bits(value: float) -> int:
    bits = _to_bits("float", np.float32(value))
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF  # nearest, ties to even


def _convert_float(source: str, result: str, value: Any) -> Any:
    """fpext / fptrunc between float types (bfloat values are their bits)."""
    if source == "bfloat":
        value = _from_bits("float", value << 16)
    return _bfloat_bits(float(value)) if result == "bfloat" else _FLOATS[result](value)


def _round_tf32(value: Any) -> int:
    bits = _to_bits("float", value)
    return ((bits + 0x1000) & ~0x1FFF) & 0xFFFFFFFF  # nearest, ties away from zero


def _step_name(kind: str) -> str:
    if kind.startswith("llvm.nvvm.shfl.sync"):
        return "shfl"
    if kind.startswith("llvm.amdgcn."):
        return "amdgpu"
    return kind.split(".")[0]


# --------------------------------------------------------------------------------------
# Warp steps, from the PTX ISA


def _ldmatrix(cta: CTA, text: str, inputs: list, warp: int) -> list:
    count = int(re.search(r"\.x(\d)", text).group(1))
    trans = ".trans" in text
    rows = []  # rows[q][r]: the 8 halves of row r of matrix q
    for q in range(count):
        rows.append([])
        for r in range(8):
            address = inputs[q * 8 + r][0]
            data = cta.memory.load(3, address, 16, warp * cta.warp_size + q * 8 + r)
            rows[q].append([int.from_bytes(data[2 * i:2 * i + 2], "little") for i in range(8)])
    out = []
    for lane in range(32):
        words = []
        for q in range(count):
            g, t = lane // 4, lane % 4
            if trans:
                lo, hi = rows[q][2 * t][g], rows[q][2 * t + 1][g]
            else:
                lo, hi = rows[q][g][2 * t], rows[q][g][2 * t + 1]
            words.append(lo | hi << 16)
        out.append(tuple(words) if count > 1 else words[0])
    return out


def _stmatrix(cta: CTA, text: str, inputs: list, warp: int) -> list:
    count = int(re.search(r"\.x(\d)", text).group(1))
    if ".trans" in text:
        raise SimulationError(f"stmatrix.trans is not simulated: {text}")
    for q in range(count):
        for r in range(8):
            # Row r of matrix q: lane 8q + r gives the address, lanes 4r..4r+3 the words.
            row = b"".join((int(inputs[4 * r + t][1 + q]) & 0xFFFFFFFF).to_bytes(4, "little") for t in range(4))
            thread = warp * cta.warp_size + q * 8 + r
            cta.memory.store(3, inputs[q * 8 + r][0], row, thread)
    return [None] * 32


#: mma kind -> (M, N, K, element bits of A/B)
_MMA = {("m16n8k16", "f16"): (16, 8, 16, 16), ("m16n8k16", "bf16"): (16, 8, 16, 16),
        ("m16n8k8", "tf32"): (16, 8, 8, 32), ("m16n8k32", "s8"): (16, 8, 32, 8), ("m8n8k4", "f64"): (8, 8, 4, 64),
        ("m16n8k32", "e4m3"): (16, 8, 32, 8), ("m16n8k32", "e5m2"): (16, 8, 32, 8)}
#: 8-bit kinds whose fragments are .s8's (the PTX ISA's m16n8k32 tables).
_BYTE_KINDS = ("s8", "e4m3", "e5m2")


def _frag_a(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f16":
        return g + 8 * ((i >> 1) & 1), q * 2 + (i & 1) + 8 * (i >> 2)
    if kind == "tf32":
        return g + 8 * (i & 1), q + 4 * (i >> 1)
    if kind in _BYTE_KINDS:
        return g + 8 * ((i >> 2) & 1), q * 4 + (i & 3) + 16 * (i >> 3)
    return g, q


def _frag_b(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f16":
        return q * 2 + (i & 1) + 8 * (i >> 1), g
    if kind == "tf32":
        return q + 4 * i, g
    if kind in _BYTE_KINDS:
        return q * 4 + (i & 3) + 16 * (i >> 2), g
    return q, g


def _frag_c(kind: str, lane: int, i: int) -> tuple[int, int]:
    g, q = lane // 4, lane % 4
    if kind == "f64":
        return g, q * 2 + i
    return g + 8 * (i >> 1), q * 2 + (i & 1)


def _elements(word: Any, bits: int, kind: str) -> list:
    """The A/B elements a register holds, as float64 or int."""
    if bits == 64:
        return [float(word)]
    if kind == "tf32":
        return [float(_from_bits("float", word & 0xFFFFE000))]
    per = 32 // bits
    parts = [(word >> (i * bits)) & ((1 << bits) - 1) for i in range(per)]
    if kind == "f16":
        return [float(np.frombuffer(p.to_bytes(2, "little"), np.float16)[0]) for p in parts]
    if kind == "bf16":
        return [float(_from_bits("float", p << 16)) for p in parts]
    if kind in ("e4m3", "e5m2"):
        return [fp8_value(p, kind) for p in parts]
    return [_s(p, 8) for p in parts]


def fp8_bytes(values: np.ndarray, kind: str) -> np.ndarray:
    """``values`` (numbers an fp8 format holds exactly) as that format's bytes."""
    codes = {fp8_value(byte, kind): byte for byte in range(256) if fp8_value(byte, kind) == fp8_value(byte, kind)}
    return np.vectorize(lambda v: codes[float(v)])(values).astype(np.uint8)


def fp8_value(byte: int, kind: str) -> float:
    """The value of an fp8 byte: e4m3 (bias 7, no infinities, S.1111.111 NaN) or e5m2
    (bias 15, IEEE-like)."""
    exponent_bits, mantissa_bits, bias = (4, 3, 7) if kind == "e4m3" else (5, 2, 15)
    sign = -1.0 if byte & 0x80 else 1.0
    exponent = (byte >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = byte & ((1 << mantissa_bits) - 1)
    top = (1 << exponent_bits) - 1
    if kind == "e4m3" and exponent == top and mantissa == (1 << mantissa_bits) - 1:
        return float("nan")
    if kind == "e5m2" and exponent == top:
        return sign * float("inf") if mantissa == 0 else float("nan")
    if exponent == 0:
        return sign * mantissa * 2.0 ** (1 - bias - mantissa_bits)
    return sign * (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)


def _mma(cta: CTA, text: str, inputs: list, warp: int) -> list:
    m = re.match(r"mma\.sync\.aligned\.(\w+)\.row\.col\.(\w+)\.(\w+)\.(\w+)\.(\w+)", text)
    shape, d_type, a_type, _, c_type = m.groups()
    rows, cols, depth, bits = _MMA[(shape, a_type)]
    kind = a_type
    groups = [len(g.split(",")) for g in re.findall(r"\{([^}]*)\}", text)]
    n_d, n_a, n_b, n_c = groups
    a, b, c = np.zeros((rows, depth)), np.zeros((depth, cols)), np.zeros((rows, cols))
    per = 32 // bits if bits < 64 else 1
    for lane in range(32):
        regs = inputs[lane]
        a_words, b_words, c_regs = regs[:n_a], regs[n_a:n_a + n_b], regs[n_a + n_b:]
        for w, word in enumerate(a_words):
            for e, v in enumerate(_elements(word, bits, kind)):
                a[_frag_a(kind, lane, w * per + e)] = v
        for w, word in enumerate(b_words):
            for e, v in enumerate(_elements(word, bits, kind)):
                b[_frag_b(kind, lane, w * per + e)] = v
        if c_type == "f16":
            halves = [e for w in c_regs for e in _elements(w, 16, "f16")]
            for i, v in enumerate(halves):
                c[_frag_c(kind, lane, i)] = v
        else:
            for i, v in enumerate(c_regs):
                c[_frag_c(kind, lane, i)] = float(v) if c_type != "s32" else _s(v, 32)
    d = a @ b + c
    out = []
    for lane in range(32):
        if d_type == "f16":
            halves = [np.float16(d[_frag_c(kind, lane, i)]) for i in range(2 * n_d)]
            words = [_to_bits("half", halves[2 * i]) | _to_bits("half", halves[2 * i + 1]) << 16 for i in range(n_d)]
            out.append(tuple(words))
        elif d_type == "s32":
            out.append(tuple(int(d[_frag_c(kind, lane, i)]) & 0xFFFFFFFF for i in range(n_d)))
        else:
            dtype = np.float32 if d_type == "f32" else np.float64
            out.append(tuple(dtype(d[_frag_c(kind, lane, i)]) for i in range(n_d)))
    return out


def _shfl(cta: CTA, name: str, inputs: list, warp: int) -> list:
    mode = name.split(".")[4]
    out = []
    for lane in range(32):
        _, value, arg, clamp = inputs[lane]
        source = {"bfly": lane ^ arg, "idx": arg, "up": lane - arg, "down": lane + arg}[mode]
        if mode == "up":
            source = source if source >= (clamp >> 8 & 31) else lane
        elif not 0 <= source < 32 or (mode == "down" and source > (clamp & 31)):
            source = lane
        out.append(inputs[source % 32][1])
    return out


def _amdgpu(cta: CTA, name: str, inputs: list, warp: int) -> list:
    from .llvm_cta_amdgpu import warp_step

    return warp_step(cta, name, inputs, warp)


_WARP_STEPS = {"ldmatrix": _ldmatrix, "stmatrix": _stmatrix, "mma": _mma, "shfl": _shfl, "amdgpu": _amdgpu}


def run_kernel(artifacts: dict, args: list, num_warps: int, warp_size: int = 32) -> CTA:
    """Run a compiled kernel (``compile_module(...).context.artifacts``) once with one
    block; ``args`` are NumPy arrays (placed in global memory, read back into the same
    arrays afterwards; one array passed twice is one buffer, as on a device) and scalars.
    ``warp_size``: 64 for AMD's CDNA wavefronts."""
    cta = CTA(artifacts["llvm_ir"], artifacts["kernel_name"], num_warps, int(artifacts.get("shared_bytes", 0)),
              warp_size)
    placed: dict[int, tuple[np.ndarray, int]] = {}
    values = []
    for a in args:
        if isinstance(a, np.ndarray):
            if id(a) not in placed:
                placed[id(a)] = (a, cta.buffer(a))
            values.append(placed[id(a)][1])
        else:
            values.append(int(a) & 0xFFFFFFFF if isinstance(a, (int, np.integer)) else a)
    cta.run(values)
    for a, address in placed.values():
        if a.flags.writeable:
            a[...] = cta.read(address, a)
    return cta
