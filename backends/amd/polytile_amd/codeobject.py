"""What an HSACO code object says about its kernels, read with the standard library.

An HSACO is an ELF shared object (``EM_AMDGPU``).  Its ``NT_AMDGPU_METADATA`` note (owner
``AMDGPU``, type 32) holds a MessagePack map: ``amdhsa.target``, ``amdhsa.version`` and
``amdhsa.kernels``, one map per kernel with its symbol, kernarg segment size, LDS size
(``.group_segment_fixed_size``), wavefront size, register counts and arguments (offset,
size and kind of each, hidden ones included).  The launcher packs arguments at the
offsets declared here, and the LDS checks compare the LDS size with the memory stage's.
"""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass, field
from typing import Any

from polytile.errors import PolytileError

EM_AMDGPU = 224
NT_AMDGPU_METADATA = 32
_SHT_NOTE = 7


class CodeObjectError(PolytileError):
    """The bytes are not an AMDGPU code object polytile can read."""


# --------------------------------------------------------------------------------------
# MessagePack (the subset a code object note uses, plus the rest of the format's scalars)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise CodeObjectError("the metadata note ends in the middle of a MessagePack value")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(">" + fmt, self.take(struct.calcsize(">" + fmt)))[0]


#: First byte -> (struct format of the length or value, what follows).
_SIZED = {
    0xC4: ("B", "bin"), 0xC5: ("H", "bin"), 0xC6: ("I", "bin"),
    0xD9: ("B", "str"), 0xDA: ("H", "str"), 0xDB: ("I", "str"),
    0xDC: ("H", "array"), 0xDD: ("I", "array"), 0xDE: ("H", "map"), 0xDF: ("I", "map"),
    0xCA: ("f", "value"), 0xCB: ("d", "value"),
    0xCC: ("B", "value"), 0xCD: ("H", "value"), 0xCE: ("I", "value"), 0xCF: ("Q", "value"),
    0xD0: ("b", "value"), 0xD1: ("h", "value"), 0xD2: ("i", "value"), 0xD3: ("q", "value"),
}
_FIXED_EXT = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}
_EXT = {0xC7: "B", 0xC8: "H", 0xC9: "I"}
_CONSTANTS = {0xC0: None, 0xC2: False, 0xC3: True}


def _read(reader: _Reader) -> Any:
    byte = reader.take(1)[0]
    if byte <= 0x7F:
        return byte
    if byte >= 0xE0:
        return byte - 0x100
    if 0x80 <= byte <= 0x8F:
        return _container(reader, "map", byte & 0x0F)
    if 0x90 <= byte <= 0x9F:
        return _container(reader, "array", byte & 0x0F)
    if 0xA0 <= byte <= 0xBF:
        return _container(reader, "str", byte & 0x1F)
    if byte in _CONSTANTS:
        return _CONSTANTS[byte]
    if byte in _SIZED:
        fmt, kind = _SIZED[byte]
        value = reader.unpack(fmt)
        return value if kind == "value" else _container(reader, kind, value)
    if byte in _FIXED_EXT or byte in _EXT:
        size = _FIXED_EXT.get(byte) or reader.unpack(_EXT[byte])
        reader.take(1)  # the extension type: code objects use none; keep the bytes
        return reader.take(size)
    raise CodeObjectError(f"byte {byte:#04x} at offset {reader.pos - 1} of the metadata note is not MessagePack")


def _container(reader: _Reader, kind: str, count: int) -> Any:
    if kind == "str":
        return reader.take(count).decode("utf-8", errors="replace")
    if kind == "bin":
        return reader.take(count)
    if kind == "array":
        return [_read(reader) for _ in range(count)]
    result = {}
    for _ in range(count):
        key = _read(reader)
        result[key] = _read(reader)
    return result


def unpack_msgpack(data: bytes) -> Any:
    """The first MessagePack value in ``data``."""
    return _read(_Reader(data))


# --------------------------------------------------------------------------------------
# The code object


@dataclass(frozen=True)
class KernelArgument:
    name: str
    offset: int
    size: int
    #: "global_buffer", "by_value", or "hidden_*" for the arguments the runtime fills in.
    value_kind: str
    address_space: str | None = None

    @property
    def hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class KernelInfo:
    name: str
    symbol: str
    kernarg_segment_size: int
    kernarg_segment_align: int
    #: Static LDS bytes of one workgroup.
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    wavefront_size: int
    sgpr_count: int
    vgpr_count: int
    agpr_count: int
    max_flat_workgroup_size: int
    sgpr_spill_count: int
    vgpr_spill_count: int
    arguments: tuple[KernelArgument, ...] = field(default=())

    @property
    def explicit_arguments(self) -> tuple[KernelArgument, ...]:
        return tuple(a for a in self.arguments if not a.hidden)

    @property
    def explicit_size(self) -> int:
        """Bytes of the arguments the caller passes (the hidden ones follow them)."""
        return max((a.offset + a.size for a in self.explicit_arguments), default=0)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, for the compile metadata."""
        data = asdict(self)
        data["arguments"] = [asdict(a) for a in self.arguments]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelInfo":
        arguments = tuple(KernelArgument(**a) for a in data.get("arguments", ()))
        return cls(**{**data, "arguments": arguments})


@dataclass(frozen=True)
class CodeObject:
    target: str
    version: tuple[int, ...]
    kernels: dict[str, KernelInfo]
    #: The whole metadata map, for whatever the fields above leave out.
    metadata: dict[str, Any]

    def kernel(self, name: str) -> KernelInfo:
        try:
            return self.kernels[name]
        except KeyError:
            raise CodeObjectError(f"the code object has no kernel '{name}' (it has "
                                  f"{', '.join(self.kernels) or 'none'})") from None

    @property
    def arch(self) -> str:
        """The processor of ``amdhsa.target`` ("amdgcn-amd-amdhsa--gfx942:xnack-" -> "gfx942")."""
        return self.target.rsplit("-", 1)[-1].split(":", 1)[0]


def _kernel(entry: dict[str, Any]) -> KernelInfo:
    def number(key: str) -> int:
        return int(entry.get(key, 0) or 0)

    arguments = tuple(
        KernelArgument(str(a.get(".name", "")), int(a[".offset"]), int(a[".size"]), str(a[".value_kind"]),
                       a.get(".address_space"))
        for a in entry.get(".args", ()))
    return KernelInfo(
        name=str(entry.get(".name", "")), symbol=str(entry.get(".symbol", "")),
        kernarg_segment_size=number(".kernarg_segment_size"), kernarg_segment_align=number(".kernarg_segment_align"),
        group_segment_fixed_size=number(".group_segment_fixed_size"),
        private_segment_fixed_size=number(".private_segment_fixed_size"), wavefront_size=number(".wavefront_size"),
        sgpr_count=number(".sgpr_count"), vgpr_count=number(".vgpr_count"), agpr_count=number(".agpr_count"),
        max_flat_workgroup_size=number(".max_flat_workgroup_size"), sgpr_spill_count=number(".sgpr_spill_count"),
        vgpr_spill_count=number(".vgpr_spill_count"), arguments=arguments)


def _notes(data: bytes) -> list[tuple[str, int, bytes]]:
    if data[:4] != b"\x7fELF":
        raise CodeObjectError("not an ELF file (an HSACO code object is one)")
    if data[4] != 2 or data[5] != 1:
        raise CodeObjectError("not a little-endian 64-bit ELF file; AMDGPU code objects are")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_AMDGPU:
        raise CodeObjectError(f"ELF machine {machine} is not AMDGPU ({EM_AMDGPU})")
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    notes = []
    for index in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + index * shentsize + 4)
        if sh_type != _SHT_NOTE:
            continue
        offset, size = struct.unpack_from("<QQ", data, shoff + index * shentsize + 24)
        pos, end = offset, offset + size
        while pos + 12 <= end:
            namesz, descsz, note_type = struct.unpack_from("<III", data, pos)
            pos += 12
            name = data[pos:pos + namesz].rstrip(b"\0").decode(errors="replace")
            pos += (namesz + 3) & ~3
            notes.append((name, note_type, data[pos:pos + descsz]))
            pos += (descsz + 3) & ~3
    return notes


def read_code_object(data: bytes) -> CodeObject:
    """The metadata of an HSACO (``bytes`` of the file)."""
    for name, note_type, desc in _notes(bytes(data)):
        if name == "AMDGPU" and note_type == NT_AMDGPU_METADATA:
            metadata = unpack_msgpack(desc)
            if not isinstance(metadata, dict):
                raise CodeObjectError("the AMDGPU metadata note is not a map")
            kernels = [_kernel(k) for k in metadata.get("amdhsa.kernels", ())]
            return CodeObject(str(metadata.get("amdhsa.target", "")), tuple(metadata.get("amdhsa.version", ())),
                              {k.name: k for k in kernels}, metadata)
    raise CodeObjectError("the code object has no NT_AMDGPU_METADATA note (code object version 3 or newer has one)")


__all__ = ["CodeObject", "CodeObjectError", "KernelArgument", "KernelInfo", "read_code_object", "unpack_msgpack"]
