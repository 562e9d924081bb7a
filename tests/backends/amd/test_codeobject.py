"""Reading HSACO code objects: the MessagePack decoder and the ELF note reader."""

from __future__ import annotations

import struct

import pytest

from polytile_amd.codeobject import CodeObjectError, KernelInfo, read_code_object, unpack_msgpack

from .kernels import add, compile_amd, f32


@pytest.mark.parametrize("data, value", [
    (b"\x05", 5), (b"\xff", -1), (b"\xe0", -32), (b"\xc0", None), (b"\xc2", False), (b"\xc3", True),
    (b"\xcc\xff", 255), (b"\xcd\x01\x00", 256), (b"\xce\x00\x01\x00\x00", 65536), (b"\xcf" + (2**40).to_bytes(8, "big"), 2**40),
    (b"\xd0\x80", -128), (b"\xd1\xff\x00", -256), (b"\xd2\xff\xff\xff\xfe", -2), (b"\xd3" + (-2**40).to_bytes(8, "big", signed=True), -2**40),
    (b"\xca" + struct.pack(">f", 1.5), 1.5), (b"\xcb" + struct.pack(">d", -0.25), -0.25),
    (b"\xa3abc", "abc"), (b"\xd9\x03abc", "abc"), (b"\xda\x00\x03abc", "abc"), (b"\xdb\x00\x00\x00\x03abc", "abc"),
    (b"\xc4\x02\x00\x01", b"\x00\x01"), (b"\x92\x01\xa1x", [1, "x"]), (b"\xdc\x00\x02\x01\x02", [1, 2]),
    (b"\x82\xa1a\x01\xa1b\x90", {"a": 1, "b": []}), (b"\xde\x00\x01\xa1k\xc3", {"k": True}),
    (b"\xd4\x01\x07", b"\x07"), (b"\xc7\x02\x05ab", b"ab"),
])
def test_msgpack_values(data, value):
    assert unpack_msgpack(data) == value


@pytest.mark.parametrize("data", [b"\xc1", b"\xa5ab", b"\x92\x01"])
def test_msgpack_errors(data):
    with pytest.raises(CodeObjectError):
        unpack_msgpack(data)


def test_not_an_elf_file():
    with pytest.raises(CodeObjectError, match="not an ELF file"):
        read_code_object(b"MZ not an elf")


def test_an_elf_file_for_another_machine():
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<H", header, 18, 62)  # x86-64
    with pytest.raises(CodeObjectError, match="ELF machine 62 is not AMDGPU"):
        read_code_object(bytes(header))


def test_real_code_object_round_trips_through_the_metadata_dict():
    artifacts = compile_amd(add, f32(), f32(), f32(), 8192, BLOCK=1024, arch="gfx90a")
    code_object = read_code_object(artifacts["hsaco"])
    assert code_object.target.startswith("amdgcn-amd-amdhsa--gfx90a")
    kernel = code_object.kernel("add")
    assert KernelInfo.from_dict(kernel.as_dict()) == kernel
    assert kernel.vgpr_count > 0 and kernel.sgpr_count > 0 and kernel.private_segment_fixed_size == 0
    assert kernel.explicit_size == 28
    with pytest.raises(CodeObjectError, match="no kernel 'sub' \\(it has add\\)"):
        code_object.kernel("sub")
