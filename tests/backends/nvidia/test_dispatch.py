"""``kernel[grid](...)`` through the native dispatcher (``_launch.c``), against the fake driver.

The kernels are compiled for real (PTX and a cubin for sm_90a); the fake driver loads any
image and reads each launch's arguments back through ``kernelParams``.  A call the
dispatcher has a plan for never reaches the Python entry point: the tests replace the
entry with one that fails, so any call that does reach it shows.
"""

from __future__ import annotations

import struct
import sys

import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.runtime.jit import LaunchError

from .fake_cuda import CUresult, FakeGpu, Kernel, fake_driver, native_module, use_native_launcher  # noqa: F401
from .test_arguments import FakeTorchDevice

TARGET = "nvidia:sm_90a"


class DType:
    """A torch dtype: one object per dtype, named as torch names it."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


FLOAT32, FLOAT16 = DType("float32"), DType("float16")
# Recognised as a torch tensor by its module, as real tensors are (torch is not imported).
Tensor = type("Tensor", (), {
    "__module__": "torch",
    "__init__": lambda self, address, device=0, dtype=FLOAT32: setattr(self, "_a", (address, device, dtype)),
    "data_ptr": lambda self: self._a[0],
    "get_device": lambda self: self._a[1],
    "dtype": property(lambda self: self._a[2]),
    "is_cuda": property(lambda self: self._a[1] >= 0),
    "device": property(lambda self: FakeTorchDevice("cuda", self._a[1]) if self._a[1] >= 0
                       else FakeTorchDevice("cpu", None)),
})


@pt.jit
def scale_add(x, y, out, n, alpha: float = 2.0, BLOCK: pl.constexpr = 256):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, alpha * pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


class _AnyImage(dict):
    """The fake driver's images: every cubin holds ``scale_add`` with its parameter sizes."""

    def get(self, key, default=None):
        return {"scale_add": Kernel((8, 8, 8, 4, 4))}

    def __getitem__(self, key):
        return self.get(key)


def _forget_launches(fn):
    # Each test has a new fake driver: kernels loaded through the last one are unknown to it.
    fn._dispatcher = fn._dispatch_source = fn._entry_fn = None
    fn._specialized_entry = False
    fn._hot.clear()
    fn.cache.clear()
    fn._plan_budget = 64


@pytest.fixture
def gpu(fake_driver, native_module, monkeypatch, ptxas):
    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu(), FakeGpu()]
    fake_driver.images = _AnyImage()
    for fn in (scale_add, scaled_copy):
        _forget_launches(fn)
    yield fake_driver
    for fn in (scale_add, scaled_copy):
        _forget_launches(fn)


def _args(n=1000, device=0, dtype=FLOAT32, base=0x10000):
    return Tensor(base, device, dtype), Tensor(base + 0x1000, device, dtype), Tensor(base + 0x2000, device, dtype), n


def _warm(*args, **kwargs):
    """Launch until the dispatcher has a plan for this call (the first launch compiles,
    the second makes the dispatcher, the third its plan)."""
    for _ in range(3):
        scale_add[(4,)](*args, target=TARGET, **kwargs)


def _python_path_refused(monkeypatch):
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the call went to the Python entry point")

    monkeypatch.setattr(scale_add, "_entry_fn", refuse)
    return calls


def _launched(fake, *, n, alpha=2.0, base=0x10000):
    launch = fake.launches[-1]
    assert launch.arguments == [struct.pack("<Q", base), struct.pack("<Q", base + 0x1000),
                                struct.pack("<Q", base + 0x2000), struct.pack("<i", n), struct.pack("<f", alpha)]
    return launch


def test_a_planned_call_is_launched_without_the_python_entry(gpu, monkeypatch):
    _warm(*_args())
    assert len(scale_add._dispatcher.results) == 1
    _python_path_refused(monkeypatch)
    compiled = scale_add[(7, 2)](*_args(), target=TARGET)
    launch = _launched(gpu, n=1000)
    assert (launch.grid, launch.block, launch.context) == ((7, 2, 1), (128, 1, 1), 0x1000)
    assert compiled is scale_add._dispatcher.results[0]


def test_an_int_or_a_list_is_a_grid_too(gpu, monkeypatch):
    _warm(*_args())
    _python_path_refused(monkeypatch)
    scale_add[5](*_args(), target=TARGET)
    scale_add[[6, 2]](*_args(), target=TARGET)
    assert [launch.grid for launch in gpu.launches[-2:]] == [(5, 1, 1), (6, 2, 1)]


def test_keywords_and_defaults_are_packed_as_the_python_path_packs_them(gpu, monkeypatch):
    for _ in range(3):
        scale_add[(4,)](*_args()[:3], n=1000, alpha=0.5, target=TARGET)
    for _ in range(3):
        scale_add[(4,)](*_args()[:3], alpha=0.5, n=1000, target=TARGET)  # another call shape: its own plan
    _python_path_refused(monkeypatch)
    scale_add[(1,)](*_args()[:3], n=1000, alpha=0.5, target=TARGET)
    _launched(gpu, n=1000, alpha=0.5)
    scale_add[(1,)](*_args()[:3], alpha=0.5, n=1000, target=TARGET)
    _launched(gpu, n=1000, alpha=0.5)
    assert len(scale_add._dispatcher.results) == 2


@pytest.mark.parametrize("change", [
    pytest.param(dict(n=1024), id="int-now-divisible-by-16"),
    pytest.param(dict(n=1), id="int-now-one"),
    pytest.param(dict(n=2**31), id="int-now-i64"),
    pytest.param(dict(dtype=FLOAT16), id="another-dtype"),
    pytest.param(dict(base=0x10004), id="unaligned-address"),
])
def test_a_call_keyed_differently_goes_to_python_and_gets_its_own_plan(gpu, change):
    _warm(*_args())
    compiled_before = scale_add.compile_count
    scale_add[(1,)](*_args(**change), target=TARGET)
    assert scale_add.compile_count == compiled_before + 1  # the Python path keyed it anew
    assert len(scale_add._dispatcher.results) == 2
    base, n = change.get("base", 0x10000), change.get("n", 1000)
    launch = gpu.launches[-1]
    assert launch.arguments[0] == struct.pack("<Q", base)
    if n < 2**31:  # (the fake reads 4 bytes of an i64 parameter)
        assert launch.arguments[3] == struct.pack("<i", n)


def test_a_constexpr_or_option_of_another_value_is_not_planned_alike(gpu, monkeypatch):
    _warm(*_args(), BLOCK=128)
    calls = _python_path_refused(monkeypatch)
    for call in (dict(BLOCK=64), dict(BLOCK=128, num_warps=8), dict(BLOCK=True)):
        with pytest.raises(AssertionError, match="Python entry point"):
            scale_add[(1,)](*_args(), target=TARGET, **call)
    assert len(calls) == 3


def test_mistakes_are_explained_by_the_python_path(gpu):
    _warm(*_args())
    with pytest.raises(LaunchError, match="argument 'n'"):
        scale_add[(1,)](*_args()[:3], "1000", target=TARGET)
    with pytest.raises(LaunchError, match="missing a required argument: 'n'"):
        scale_add[(1,)](*_args()[:3], target=TARGET)
    cpu = Tensor(0x10000, -1)
    with pytest.raises(LaunchError, match="'x'"):
        scale_add[(1,)](cpu, *_args()[1:], target=TARGET)
    with pytest.raises(LaunchError, match="on cuda:1, but argument 'x' is on cuda:0"):
        scale_add[(1,)](_args()[0], _args(device=1)[1], *_args()[2:], target=TARGET)


def test_an_empty_or_oversized_grid_takes_the_python_path(gpu):
    _warm(*_args())
    launches = len(gpu.launches)
    scale_add[(0,)](*_args(), target=TARGET)
    assert len(gpu.launches) == launches
    with pytest.raises(LaunchError, match="more than the 65535"):
        scale_add[(1, 70000)](*_args(), target=TARGET)


@pytest.mark.parametrize("grid", [(4.0,), (2.5, 1), (True,), ("4",), (1, 1, 65536), (2**31,),
                                  lambda meta: (1000 / meta["BLOCK"],)])
def test_a_grid_that_is_not_an_integer_or_too_large_launches_nothing_once_planned(gpu, grid):
    """A float grid was truncated (n / BLOCK programs, silently): the dispatcher leaves
    what is not an int in range to the Python path, which refuses it."""
    _warm(*_args())
    scale_add[lambda meta: (4,)](*_args(), target=TARGET)  # a plan for callable grids too
    scale_add[lambda meta: (4,)](*_args(), target=TARGET)
    launches = len(gpu.launches)
    with pytest.raises(LaunchError, match=r"axis \d (must be an integer|has \d+ programs, more than)"):
        scale_add[grid](*_args(), target=TARGET)
    assert len(gpu.launches) == launches


def test_an_argument_given_twice_is_a_launch_error_once_planned(gpu):
    _warm(*_args())
    launches = len(gpu.launches)
    with pytest.raises(LaunchError, match="argument 'n' is given twice"):
        scale_add[(4,)](*_args(), n=1000, target=TARGET)
    assert len(gpu.launches) == launches


def test_a_callable_grid_sees_what_it_sees_on_the_python_path(gpu, monkeypatch):
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (pt.cdiv(meta["n"], meta["BLOCK"]),)

    args = _args()
    _warm(*args)
    scale_add._dispatcher.forget()
    scale_add[grid](*args, target=TARGET)  # no plan: the Python path calls the grid, then plans the call
    _python_path_refused(monkeypatch)
    scale_add[grid](*args, target=TARGET)
    assert gpu.launches[-1].grid == (4, 1, 1)
    python_path, native = seen
    assert python_path == native
    assert native["n"] == 1000 and native["BLOCK"] == 256 and native["alpha"] == 2.0 and native["num_warps"] == 4
    assert native["target"] == TARGET and set(native) >= {"x", "y", "out"}


def test_a_grid_returning_a_callable_is_refused_as_on_the_python_path(gpu):
    _warm(*_args())
    with pytest.raises(LaunchError, match="the grid must be a tuple"):
        scale_add[lambda meta: (lambda again: (3,))](*_args(), target=TARGET)


def test_numpy_integers_and_tuple_subclasses_are_grids_in_c_too(gpu, monkeypatch):
    import collections

    import numpy as np

    _warm(*_args())
    _python_path_refused(monkeypatch)
    Size = collections.namedtuple("Size", "x y")  # torch.Size is a tuple subclass too
    scale_add[(np.int64(4), np.int32(2))](*_args(), target=TARGET)
    scale_add[Size(5, 1)](*_args(), target=TARGET)
    assert [launch.grid for launch in gpu.launches[-2:]] == [(4, 2, 1), (5, 1, 1)]


def test_a_planned_call_needing_python_once_is_not_planned_again(gpu):
    _warm(*_args())
    budget = scale_add._plan_budget
    for _ in range(10):
        scale_add[(0,)](*_args(), target=TARGET)  # an empty grid: the Python path launches nothing
    assert len(scale_add._dispatcher.results) == 1 and scale_add._plan_budget == budget


def test_the_stream_is_torchs_current_one_as_on_the_python_path(gpu, monkeypatch):
    from polytile.runtime import args as runtime_args

    monkeypatch.setattr(runtime_args, "_current_raw_stream", lambda device: 0x5000 + device)
    scale_add[(1,)](*_args(device=1), target=TARGET)  # the Python path (compiles, loads on device 1)
    python_path = gpu.launches[-1].stream
    _warm(*_args(device=1))
    _python_path_refused(monkeypatch)
    scale_add[(1,)](*_args(device=1), target=TARGET)
    assert python_path == gpu.launches[-1].stream == 0x5001


def test_a_launch_on_another_backend_is_not_planned(gpu):
    import numpy as np

    _warm(*_args())
    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    for _ in range(3):
        scale_add[(1,)](x, x, out, 8, target="interp")
    assert (out == 3.0).all() and len(scale_add._dispatcher.results) == 1


def test_a_target_change_during_a_launch_keeps_that_launch_from_being_planned(gpu):
    _warm(*_args())
    scale_add._dispatcher.forget()

    def grid(meta):
        config.set(target="interp")  # as another thread could, while this launch runs
        return (1,)

    try:
        with config.override(target=TARGET):
            scale_add[grid](*_args())
            assert scale_add._dispatcher.results == ()  # its kernel is the old target's
    finally:
        config.reset("target")


def test_calls_that_cannot_be_planned_fall_back_to_the_plain_entry_point(gpu):
    from .test_arguments import CaiArray

    gpu.allocations.append((0x10000, 0x20000, 0))
    args = (CaiArray(0x10000), CaiArray(0x11000), CaiArray(0x12000), 1000)  # read by the Python path only
    for _ in range(70):
        scale_add[(1,)](*args, target=TARGET)
    assert scale_add._dispatcher is None and scale_add._plan_budget == 0
    assert type(scale_add[(1,)]).__name__ == "partial"


def test_the_grid_function_runs_once_when_its_result_needs_the_python_path(gpu):
    calls = []

    def grid(meta):
        calls.append(1)
        return [0]  # an empty grid: the Python path decides (nothing is launched)

    _warm(*_args())
    launches = len(gpu.launches)
    scale_add[grid](*_args(), target=TARGET)
    assert len(calls) == 1 and len(gpu.launches) == launches


def test_a_device_the_kernel_is_not_loaded_on_goes_to_python_then_is_planned(gpu, monkeypatch):
    _warm(*_args())
    scale_add[(1,)](*_args(device=1), target=TARGET)  # loads it on device 1
    assert gpu.launches[-1].context == 0x1001
    scale_add[(1,)](*_args(device=1), target=TARGET)  # learns the plan with device 1 loaded
    _python_path_refused(monkeypatch)
    scale_add[(1,)](*_args(device=1), target=TARGET)
    scale_add[(1,)](*_args(device=0), target=TARGET)
    assert [launch.context for launch in gpu.launches[-2:]] == [0x1001, 0x1000]


def test_driver_errors_name_the_kernel(gpu, monkeypatch):
    _warm(*_args())
    _python_path_refused(monkeypatch)
    gpu.launch_result = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(Exception, match="scale_add"):
        scale_add[(1,)](*_args(), target=TARGET)


def test_changing_the_target_setting_forgets_the_plans(gpu):
    _warm(*_args())
    assert scale_add._dispatcher.results
    with config.override(target="interp"):
        assert scale_add._dispatcher.results == ()


SCALE = 2.0


@pt.jit
def scaled_copy(x, out, n, BLOCK: pl.constexpr = 128):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    pl.store(out + offs, pl.load(x + offs, mask=offs < n) * SCALE, mask=offs < n)


def test_a_changed_global_recompiles_through_the_python_path(gpu, monkeypatch):
    gpu.images = type("Images", (_AnyImage,), {"get": lambda self, key, default=None: {
        "scaled_copy": Kernel((8, 8, 4))}})()
    x, out = Tensor(0x10000), Tensor(0x20000)
    for _ in range(3):
        scaled_copy[(1,)](x, out, 100, target=TARGET)
    assert len(scaled_copy._dispatcher.results) == 1
    compiled = scaled_copy.compile_count
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
    scaled_copy[(1,)](x, out, 100, target=TARGET)  # the plan's guard fails: the Python path recompiles
    assert scaled_copy.compile_count == compiled + 1
    assert scaled_copy._dispatcher.results[0] is not scaled_copy._dispatcher.results[1]  # planned anew


def test_a_function_with_a_dispatcher_is_garbage_collected(gpu):
    import gc
    import weakref

    def make():
        @pt.jit
        def scale_add(x, y, out, n, alpha: float = 2.0, BLOCK: pl.constexpr = 256):
            offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
            pl.store(out + offs, alpha * pl.load(x + offs, mask=offs < n), mask=offs < n)
        return scale_add

    fn = make()
    for _ in range(3):
        bound = fn[(1,)]
        bound(*_args(), target=TARGET)
    assert fn._dispatcher is not None and len(fn._dispatcher.results) == 1
    alive = weakref.ref(fn)
    del fn, bound
    gc.collect()
    assert alive() is None


def test_threads_launching_while_plans_are_learned_and_dropped_keep_their_own_arguments(gpu):
    import threading

    _warm(*_args())
    errors = []
    stop = threading.Event()

    def launch(base, n):
        try:
            for _ in range(300):
                scale_add[(1,)](*_args(n=n, base=base), target=TARGET)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def churn():
        while not stop.is_set():
            scale_add._dispatcher.forget()

    workers = [threading.Thread(target=launch, args=(0x100000 * (i + 1), 1000 + 16 * i)) for i in range(3)]
    churner = threading.Thread(target=churn)
    churner.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stop.set()
    churner.join()
    assert not errors
    expected = {struct.pack("<Q", 0x100000 * (i + 1)): struct.pack("<i", 1000 + 16 * i) for i in range(3)}
    launches = [launch for launch in gpu.launches[-900:]]
    assert len(launches) == 900
    for launch in launches:  # each launch's bytes are its own caller's, whichever path took it
        assert launch.arguments[3] == expected[launch.arguments[0]]
        assert launch.arguments[1] == struct.pack("<Q", int.from_bytes(launch.arguments[0], "little") + 0x1000)


# -- arguments a plugin adapts (polytile-tma's host descriptors) ------------------------------


@pt.jit
def descriptor_copy(src, dst, BLOCK: pl.constexpr = 2):
    dst.store([pl.program_id(0) * BLOCK], src.load([pl.program_id(0) * BLOCK]))


class _DescriptorImage(dict):
    """``descriptor_copy`` of two rank-1 descriptors: (base, shape0) each."""

    def get(self, key, default=None):
        return {"descriptor_copy": Kernel((8, 4, 8, 4))}

    def __getitem__(self, key):
        return self.get(key)


def test_descriptor_arguments_are_planned_and_packed_as_their_parts(gpu, monkeypatch):
    tma = pytest.importorskip("polytile_tma.host", reason="host descriptors come with polytile-tma")
    gpu.images = _DescriptorImage()
    _forget_launches(descriptor_copy)
    x, y = Tensor(0x10000), Tensor(0x20000)
    # Blocks of 2 f32 (8 bytes): too narrow for a bulk copy, so no tensor map is part of them.
    src, dst = tma.TensorDescriptor(x, [64], [1], [2]), tma.TensorDescriptor(y, [64], [1], [2])
    for _ in range(3):
        descriptor_copy[(4,)](src, dst, target=TARGET)
    assert descriptor_copy._dispatcher is not None and len(descriptor_copy._dispatcher.results) == 1
    calls = []
    entry = descriptor_copy._entry_fn

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the call went to the Python entry point")

    descriptor_copy._entry_fn = refuse
    descriptor_copy[(4,)](src, dst, target=TARGET)
    assert gpu.launches[-1].arguments == [struct.pack("<Q", 0x10000), struct.pack("<i", 64),
                                          struct.pack("<Q", 0x20000), struct.pack("<i", 64)]
    # Another descriptor keyed alike (a shape still a multiple of 16, another address): planned too.
    other = tma.TensorDescriptor(Tensor(0x30000), [32], [1], [2])
    descriptor_copy[(2,)](other, dst, target=TARGET)
    assert gpu.launches[-1].arguments[:2] == [struct.pack("<Q", 0x30000), struct.pack("<i", 32)]
    # A field changed in place changes the parts the dispatcher packs.
    src.shape[0] = 48
    descriptor_copy[(3,)](src, dst, target=TARGET)
    assert gpu.launches[-1].arguments[1] == struct.pack("<i", 48)
    assert not calls
    # Keyed otherwise (a shape no multiple of 16): the Python path, which compiles anew.
    descriptor_copy._entry_fn = entry
    src.shape[0] = 40
    before = descriptor_copy.compile_count
    descriptor_copy[(3,)](src, dst, target=TARGET)
    assert descriptor_copy.compile_count == before + 1
    assert gpu.launches[-1].arguments[1] == struct.pack("<i", 40)
    _forget_launches(descriptor_copy)


# -- adapted arguments whose parts include a by-value tensor map (Hopper TMA) -------------------


def test_an_adapted_argument_with_a_tensor_map_part_launches_natively(fake_driver, native_module, monkeypatch):
    """A plan over a launcher whose parameters are an adapted argument's parts (a base
    pointer and a 128-byte tensor map) and an int: the dispatcher checks the key, packs
    the map's bytes in C and launches; a map of another length goes to the slow path."""
    from polytile.ir import types as t
    from polytile.runtime.dispatch import CallPlan, SlotCheck
    from polytile_nvidia.launcher import Launcher

    from .test_arguments import TensorMapLike

    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images[b"tma image"] = {"k": Kernel((8, 128, 4))}
    parameters = [("d_base", t.PointerType(t.f16)), ("d_map", TensorMapLike()), ("n", t.i32)]
    launcher = Launcher(b"tma image", "k", parameters, num_warps=4)
    first_map = bytes(range(128))
    launcher((1, 1, 1), [Tensor(0x10000, 0, FLOAT16), first_map, 1])  # the Python path: loads the kernel

    class Described:
        """A value an adapter passes as (base tensor, tensor map bytes)."""

        def __init__(self, base, tensor_map, key="f16 64x64"):
            self.base, self.tensor_map, self.key = base, tensor_map, key

    def key_and_parts(value):
        return value.key, (value.base, value.tensor_map)

    slow_calls = []

    def slow(grid, args, kwargs, grid_was_called, planned):
        slow_calls.append(args)
        return "slow"

    dispatcher = launcher.make_dispatcher(slow)
    plan = CallPlan(nargs=2, kwnames=None, slots=[SlotCheck("adapted", (key_and_parts, "f16 64x64"), parameter=0,
                                                            parts=2),
                                                  SlotCheck("int", hint="any", range="i32", parameter=2)],
                    slot_names=("d", "n"), meta_base={}, guard=None, result="compiled")
    native_plan = launcher.dispatch_plan(plan)
    assert native_plan is not None  # "M" flows into the parts' codes
    dispatcher.learn(native_plan)
    other_map = bytes(reversed(range(128)))
    assert dispatcher.bind((3,))(Described(Tensor(0x20000, 0, FLOAT16), other_map), 77) == "compiled"
    assert fake_driver.launches[-1].arguments == [struct.pack("<Q", 0x20000), other_map, struct.pack("<i", 77)]
    assert fake_driver.launches[-1].grid == (3, 1, 1)
    assert not slow_calls and launcher.launch_counts().native == 1
    # A part that is not bytes of exactly 128, or another key: the slow path decides.
    for value in (Described(Tensor(0x20000, 0, FLOAT16), other_map[:127]),
                  Described(Tensor(0x20000, 0, FLOAT16), bytearray(other_map)),
                  Described(Tensor(0x20000, 0, FLOAT16), None),
                  Described(Tensor(0x20000, 0, FLOAT16), other_map, key="f32 64x64")):
        assert dispatcher.bind((3,))(value, 77) == "slow"
    assert len(slow_calls) == 4 and launcher.launch_counts().native == 1


def test_an_unchanged_versioned_value_is_packed_again_without_asking_its_adapter(fake_driver, native_module,
                                                                                 monkeypatch):
    """With a version attribute, the slot reuses the last parts of the same object while
    its __dict__ holds the same objects and its tensor is at the same address; any change
    asks key_and_parts again."""
    from polytile.ir import types as t
    from polytile.runtime.dispatch import CallPlan, SlotCheck
    from polytile_nvidia.launcher import Launcher

    from .test_arguments import TensorMapLike

    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images[b"tma image"] = {"k": Kernel((8, 128, 4))}
    parameters = [("d_base", t.PointerType(t.f16)), ("d_map", TensorMapLike()), ("n", t.i32)]
    launcher = Launcher(b"tma image", "k", parameters, num_warps=4)
    launcher((1, 1, 1), [Tensor(0x10000, 0, FLOAT16), bytes(128), 1])

    class Described:
        def __init__(self, base, tensor_map, versioned=True):
            self.base, self.tensor_map = base, tensor_map
            if versioned:
                self._version = True

    asked = []

    def key_and_parts(value):
        asked.append(value)
        return "f16 64x64", (value.base, value.tensor_map)

    dispatcher = launcher.make_dispatcher(lambda *a: "slow")
    plan = CallPlan(nargs=2, kwnames=None,
                    slots=[SlotCheck("adapted", (key_and_parts, "f16 64x64", "_version"), parameter=0, parts=2),
                           SlotCheck("int", hint="any", range="i32", parameter=2)],
                    slot_names=("d", "n"), meta_base={}, guard=None, result="compiled")
    dispatcher.learn(launcher.dispatch_plan(plan))
    base = Tensor(0x20000, 0, FLOAT16)
    value = Described(base, bytes(range(128)))
    call = dispatcher.bind((1,))
    for _ in range(3):
        assert call(value, 5) == "compiled"
    assert asked == [value]  # asked once, then packed from what it answered
    assert fake_driver.launches[-1].arguments[:2] == [struct.pack("<Q", 0x20000), bytes(range(128))]
    # A field replaced: asked again, and the new parts packed.
    value.tensor_map = bytes(reversed(range(128)))
    assert call(value, 5) == "compiled" and len(asked) == 2
    assert fake_driver.launches[-1].arguments[1] == bytes(reversed(range(128)))
    # The version dropped (a change in place): asked at every launch until it is back.
    del value._version
    call(value, 5)
    call(value, 5)
    assert len(asked) == 4
    value._version = True
    call(value, 5)
    call(value, 5)
    assert len(asked) == 5
    # The tensor moved (its storage replaced): asked again, its new address packed.
    base._a = (0x30000, 0, FLOAT16)
    call(value, 5)
    assert len(asked) == 6 and fake_driver.launches[-1].arguments[0] == struct.pack("<Q", 0x30000)
    call(value, 5)
    assert len(asked) == 6
    # Its element type changed in place (same address): asked again.
    base._a = (0x30000, 0, FLOAT32)
    call(value, 5)
    assert len(asked) == 7
    call(value, 5)
    assert len(asked) == 7
    # Another object with the same fields: asked (the cache is per object).
    call(Described(base, value.tensor_map), 5)
    assert len(asked) == 8
    # Without a version attribute: asked every time.
    plain = Described(base, value.tensor_map, versioned=False)
    call(plain, 5)
    call(plain, 5)
    assert len(asked) == 10


def test_a_kernel_with_global_scratch_gets_its_allocation_from_the_plan(fake_driver, native_module, monkeypatch):
    """A plan over a launcher whose last parameter is the hidden global scratch: at each
    launch the dispatcher asks the compiled kernel's allocation for the grid's programs,
    packs the address it answers, releases the memory after the launch, and lets an
    allocation's error (no allocator set, say) through as the Python path raises it."""
    import weakref

    from polytile.ir import types as t
    from polytile.runtime.dispatch import CallPlan, SlotCheck
    from polytile_nvidia.launcher import Launcher

    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images[b"scratch image"] = {"k": Kernel((8, 4, 8))}
    parameters = [("x", t.PointerType(t.f32)), ("n", t.i32), ("global_scratch", t.PointerType(t.i8))]
    launcher = Launcher(b"scratch image", "k", parameters, num_warps=4)
    launcher((1, 1, 1), [Tensor(0x10000), 1, Tensor(0x90000)])  # the Python path: loads the kernel

    class Memory:
        pass

    asked, held = [], []

    class Compiled:
        @staticmethod
        def scratch_allocation(programs):
            asked.append(programs)
            if programs == 99:
                raise LaunchError("kernel 'k' needs 128 bytes of global scratch memory per program")
            memory = Memory()
            held.append(weakref.ref(memory))
            return memory, 0xABC000 + programs * 0x100

    dispatcher = launcher.make_dispatcher(lambda *args: "slow")
    plan = CallPlan(nargs=2, kwnames=None, slots=[SlotCheck("tensor", (type(Tensor(0)), FLOAT32), hint="any",
                                                            parameter=0),
                                                  SlotCheck("int", hint="any", range="i32", parameter=1)],
                    slot_names=("x", "n"), meta_base={}, guard=None, result=Compiled())
    native_plan = launcher.dispatch_plan(plan)
    assert native_plan is not None
    dispatcher.learn(native_plan)
    assert dispatcher.bind((3, 2))(Tensor(0x20000), 5) is plan.result
    assert asked == [6] and launcher.launch_counts().native == 1
    assert fake_driver.launches[-1].arguments == [struct.pack("<Q", 0x20000), struct.pack("<i", 5),
                                                  struct.pack("<Q", 0xABC000 + 6 * 0x100)]
    assert held[0]() is None  # released once the launch was made
    with pytest.raises(LaunchError, match="needs 128 bytes of global scratch"):
        dispatcher.bind((99,))(Tensor(0x20000), 5)
    assert launcher.launch_counts().native == 1


def test_a_descriptor_with_a_native_answer_is_packed_reading_its_tensor_once_per_launch(fake_driver, native_module,
                                                                                      monkeypatch):
    """polytile-tma's C descriptors answer through the adapter's ``native_answer``: the
    dispatcher packs the base's address and device the answer read (no second read), the
    shape and strides, and the tensor map's bytes; a moved tensor gets its new address
    and a new map, a descriptor made again keeps the map, and a base on no GPU goes to
    the slow path, as key_and_parts's answer would."""
    from polytile.ir import types as t
    from polytile.runtime.dispatch import CallPlan, SlotCheck
    from polytile_nvidia.launcher import Launcher

    arguments = pytest.importorskip("polytile_tma.arguments", reason="host descriptors come with polytile-tma")
    from polytile_tma import host, tensormap

    if host.NATIVE == "Python":
        pytest.skip("the C descriptor module is not built")
    encoded = []

    def encode(address, element, shape, strides, box, swizzle, padding):
        encoded.append(address)
        return bytes([len(encoded)]) * 128

    monkeypatch.setattr(tensormap, "encode_tensor_map", encode)
    arguments.forget_tensor_maps()
    reads = {"data_ptr": 0, "get_device": 0}

    def counted(name, index):
        def read(self):
            reads[name] += 1
            return self._a[index]
        return read

    Counted = type("Tensor", (Tensor,), {"__module__": "torch", "data_ptr": counted("data_ptr", 0),
                                         "get_device": counted("get_device", 1)})
    base = Counted(0x40000, 0, FLOAT16)
    desc = host.TensorDescriptor(base, (64, 96), (96, 1), [64, 64])
    adapter = arguments.BULK_ADAPTER
    assert adapter.native_answer is not None
    key = adapter.key(desc)
    parts = adapter.parts(key)
    assert [p.suffix for p in parts] == ["_base", "_shape0", "_shape1", "_stride0", "_map"]
    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu()]
    sizes = tuple(128 if p.suffix == "_map" else 8 if p.suffix in ("_base",) or p.type == t.i64 else 4
                  for p in parts)
    fake_driver.images[b"tma image"] = {"k": Kernel((*sizes, 4))}
    launcher = Launcher(b"tma image", "k", [("d" + p.suffix, p.type) for p in parts] + [("n", t.i32)], num_warps=4)
    launcher((1, 1, 1), [Tensor(0x10000, 0, FLOAT16), 64, 96, 96, bytes(128), 1])  # loads the kernel

    def planned(answer):
        dispatcher = launcher.make_dispatcher(lambda *args: "slow")
        plan = CallPlan(nargs=2, kwnames=None,
                        slots=[SlotCheck("adapted", (adapter.key_and_parts, key, None, answer), parameter=0,
                                         parts=len(parts)),
                               SlotCheck("int", hint="any", range="i32", parameter=len(parts))],
                        slot_names=("d", "n"), meta_base={}, guard=None, result="compiled")
        dispatcher.learn(launcher.dispatch_plan(plan))
        return dispatcher.bind((2,))

    call = planned(adapter.native_answer)

    def packed(address, shape0, map_byte):
        launch = fake_driver.launches[-1]
        shape = [struct.pack("<i", shape0), struct.pack("<i", 96)]
        stride = struct.pack("<q", 96) if len(launch.arguments[3]) == 8 else struct.pack("<i", 96)
        return launch.arguments == [struct.pack("<Q", address), *shape, stride, bytes([map_byte]) * 128,
                                    struct.pack("<i", 7)]

    assert call(desc, 7) == "compiled" and packed(0x40000, 64, 1)
    before = launcher.launch_counts().native
    reads.update(data_ptr=0, get_device=0)
    for _ in range(3):
        assert call(desc, 7) == "compiled"
    assert reads == {"data_ptr": 3, "get_device": 3} and encoded == [0x40000]
    assert launcher.launch_counts().native == before + 3 and packed(0x40000, 64, 1)
    # The tensor moved: its new address, and a new map for it.
    base._a = (0x80000, 0, FLOAT16)
    assert call(desc, 7) == "compiled" and packed(0x80000, 64, 2) and encoded == [0x40000, 0x80000]
    # A descriptor made again for the same tensor: the map kept for it, nothing encoded.
    reads.update(data_ptr=0, get_device=0)
    assert call(host.TensorDescriptor(base, (64, 96), (96, 1), [64, 64]), 7) == "compiled"
    assert packed(0x80000, 64, 2) and len(encoded) == 2
    assert reads == {"data_ptr": 2, "get_device": 1}  # made (its address checked), then launched
    # Made by from_tensor: the address is not read at construction; the launch reads it
    # once and checks it there (an unaligned one goes to the slow path, which names it).
    Shaped = type("Tensor", (Counted,), {"__module__": "torch", "shape": (64, 96), "stride": lambda self: (96, 1)})
    tensor = Shaped(0x80000, 0, FLOAT16)
    host.TensorDescriptor.from_tensor(tensor, [64, 64])  # the first of its type: Python's path learns the type
    reads.update(data_ptr=0, get_device=0)
    made = host.TensorDescriptor.from_tensor(tensor, [64, 64])
    assert reads == {"data_ptr": 0, "get_device": 0}
    assert call(made, 7) == "compiled" and packed(0x80000, 64, 2) and len(encoded) == 2
    assert reads == {"data_ptr": 1, "get_device": 1}
    tensor._a = (0x80008, 0, FLOAT16)
    assert call(host.TensorDescriptor.from_tensor(tensor, [64, 64]), 7) == "slow"
    # A field changed in place: the parts follow.
    desc.shape = [48, 96]
    assert call(desc, 7) == "compiled" and packed(0x80000, 48, 3)
    # A base on no GPU: the slow path decides (as with key_and_parts's answer).
    base._a = (0x80000, -1, FLOAT16)
    assert call(desc, 7) == "slow"
    # The same launches with the answer of key_and_parts (no native answer) pack the same bytes.
    base._a = (0x80000, 0, FLOAT16)
    plain = planned(None)
    assert plain(desc, 7) == "compiled" and packed(0x80000, 48, 3)
    # A capsule of another ABI, or no capsule at all: ignored, key_and_parts answers.
    for other in (_capsule(b"polytile.native_answer.v2"), "not a capsule"):
        reads.update(data_ptr=0, get_device=0)
        assert planned(other)(desc, 7) == "compiled" and packed(0x80000, 48, 3)
        assert reads["data_ptr"] == 2  # key_and_parts read it, then the dispatcher again
    # A map the driver cannot encode: the answer says so and the slow path decides, with
    # the encoder asked once per launch (not again by key_and_parts).
    def refuse(*args):
        encoded.append("refused")
        raise tensormap.TensorMapError("the driver refused it")

    monkeypatch.setattr(tensormap, "encode_tensor_map", refuse)
    base._a = (0xC0000, 0, FLOAT16)
    before = len(encoded)
    assert call(desc, 7) == "slow" and encoded[before:] == ["refused"]
    arguments.forget_tensor_maps()


_CAPSULE_NAMES = []


def _capsule(name: bytes):
    """A PyCapsule named ``name`` (its name is kept alive here, as the capsule needs)."""
    import ctypes

    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    _CAPSULE_NAMES.append(ctypes.create_string_buffer(name))
    return new(1, ctypes.cast(_CAPSULE_NAMES[-1], ctypes.c_char_p), None)
