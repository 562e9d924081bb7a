"""``polytile.set_allocator`` and the launch of a kernel with global scratch
(polytile.runtime.allocator): what the allocator is asked, what the kernel gets, and the
errors that name the kernel."""

from __future__ import annotations

import pytest

import polytile
from polytile.errors import LaunchError
from polytile.runtime.allocator import get_allocator, scratch_launcher, set_allocator


class Memory:
    """A device array as an allocator returns one (the launcher only reads it)."""

    def __init__(self, address: int, nbytes: int):
        self.address, self.nbytes = address, nbytes

    def data_ptr(self) -> int:
        return self.address


@pytest.fixture(autouse=True)
def no_allocator():
    saved = get_allocator()
    set_allocator(None)
    yield
    set_allocator(saved)


def _recording_launcher():
    calls = []

    def launch(grid, args, stream=None):
        calls.append((grid, list(args), stream))

    return launch, calls


def test_set_allocator_is_the_top_level_name_and_takes_functions_or_none():
    assert polytile.set_allocator is set_allocator
    with pytest.raises(TypeError, match="takes a function"):
        set_allocator(42)
    set_allocator(lambda size, alignment, stream: None)
    assert get_allocator() is not None
    set_allocator(None)
    assert get_allocator() is None


def test_the_allocator_gets_the_bytes_of_the_whole_grid_and_the_kernel_gets_them_last():
    asked = []

    def alloc(size, alignment, stream):
        asked.append((size, alignment, stream))
        return Memory(0x10000, size)

    set_allocator(alloc)
    inner, calls = _recording_launcher()
    launch = scratch_launcher(inner, "k", 384, 128, ["the tensor map of pl.make_tensor_descriptor (line 3)"])
    launch((4, 2, 3), ["a", 7])
    assert asked == [(384 * 24, 128, None)]
    (grid, args, stream), = calls
    assert grid == (4, 2, 3) and args[:2] == ["a", 7] and args[2].address == 0x10000 and stream is None
    launch((1, 1, 1), ["a", 7], stream=5)
    assert asked[-1] == (384, 128, 5) and calls[-1][2] == 5


def test_without_an_allocator_the_launch_says_what_needs_scratch_and_how_to_set_one():
    inner, calls = _recording_launcher()
    launch = scratch_launcher(inner, "matmul", 256, 128, ["the tensor map of pl.make_tensor_descriptor (line 9)"])
    with pytest.raises(LaunchError) as info:
        launch((2, 1, 1), [])
    message = str(info.value)
    assert "kernel 'matmul'" in message and "256 bytes" in message and "line 9" in message
    assert "polytile.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8" in message
    assert calls == []


def test_an_empty_grid_asks_no_allocator():
    inner, calls = _recording_launcher()
    scratch_launcher(inner, "k", 128, 128, [])((0, 1, 1), [1])
    assert calls == [((0, 1, 1), [1, None], None)]


@pytest.mark.parametrize("returned, message", [
    (Memory(0x10010, 1 << 20), "not a multiple of the 128 bytes"),
    (Memory(0x10000, 100), "returned 100 bytes where 128 were asked for"),
    (object(), "returned object; it must return a device array"),
])
def test_what_the_allocator_returns_is_checked(returned, message):
    set_allocator(lambda size, alignment, stream: returned)
    inner, calls = _recording_launcher()
    with pytest.raises(LaunchError, match=message):
        scratch_launcher(inner, "k", 128, 128, [])((1, 1, 1), [])
    assert calls == []


def test_an_array_interface_is_accepted():
    class Array:
        __cuda_array_interface__ = {"data": (0x20000, False), "shape": (128,), "typestr": "|i1", "version": 3}

    set_allocator(lambda size, alignment, stream: Array())
    inner, calls = _recording_launcher()
    scratch_launcher(inner, "k", 128, 128, [])((1, 1, 1), [])
    assert isinstance(calls[0][1][0], Array)


def test_the_docs_allocator_runs(monkeypatch):
    """The snippet of docs/runtime.md's "Global scratch" section, with a stand-in torch."""
    import re
    import sys
    import types
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    section = text[text.index("## Global scratch"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    made = []
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        int8="int8", empty=lambda size, dtype, device: made.append((size, dtype, device)) or Memory(0x1000, size)))
    exec(compile(snippet, "docs/runtime.md", "exec"), {})
    inner, calls = _recording_launcher()
    scratch_launcher(inner, "k", 256, 128, [])((2, 1, 1), [])
    assert made == [(512, "int8", "cuda")] and calls[0][1][0].address == 0x1000
