"""Launching: device choice, contexts, streams, grids, shared memory, errors; then on a GPU.

The first part runs against :class:`~.fake_cuda.FakeDriver`, which reads the arguments
back through kernelParams as the driver does; tests marked ``gpu`` launch the
hand-written PTX kernels on a real device and check what they computed.
"""

from __future__ import annotations

import struct
import sys
import types

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl

from polytile.ir import types as t
from polytile.runtime.jit import LaunchError
from polytile.runtime import args as polytile_args
from polytile_nvidia.driver import CudaDriverError, OutOfResourcesError
from polytile_nvidia.launcher import Launcher

from .fake_cuda import (CUresult, DeviceBuffer, FakeGpu, Kernel, configure_native_launcher, fake_driver,  # noqa: F401
                        native_module, nvidia_gpu, torch_cuda, use_native_launcher)
from .ptx_kernels import DYNAMIC_SHARED, SCALARS, VECTOR_ADD
from .test_arguments import CaiArray, Tensor

IMAGE = b"\x7fELF fake add_kernel"
F32_PTR = t.PointerType(t.f32)
ADD_PARAMS = [("x_ptr", F32_PTR), ("y_ptr", F32_PTR), ("out_ptr", F32_PTR), ("n", t.i32)]


@pytest.fixture(params=["bindings", "native"])
def fake(request, fake_driver, monkeypatch):
    """The fake driver, launched through cuda-bindings' calling convention or through
    the native launcher: every test below must hold on both paths."""
    if request.param == "native":
        use_native_launcher(fake_driver, request.getfixturevalue("native_module"), monkeypatch)
    return fake_driver


@pytest.fixture
def add(fake, fake_driver):
    fake_driver.gpus = [FakeGpu(), FakeGpu()]
    fake_driver.images[IMAGE] = {"add_kernel": Kernel((8, 8, 8, 4))}
    return Launcher(IMAGE, "add_kernel", ADD_PARAMS, num_warps=4)


def test_launches_go_through_cuda_bindings_until_the_native_launcher_is_built(fake_driver, native_module,
                                                                             monkeypatch):
    # A native launcher not built yet is built on a thread: the first launch of a process
    # must not wait for the C compiler.
    import threading

    from polytile_nvidia import driver

    release = threading.Event()

    def build():
        assert release.wait(30)
        configure_native_launcher(fake_driver, native_module)
        return native_module, "built by the test"

    monkeypatch.setattr(driver, "_build_in_background", lambda: True)
    monkeypatch.setattr(driver, "_choose_native", build)
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images[IMAGE] = {"add_kernel": Kernel((8, 8, 8, 4))}
    add = Launcher(IMAGE, "add_kernel", ADD_PARAMS, num_warps=4)
    args = [Tensor(0x1000, 0), Tensor(0x2000, 0), Tensor(0x3000, 0), 1000]
    add((3, 1, 1), args)
    assert driver.native_pending() and add._native is None and "cuda-bindings" in repr(add)
    release.set()
    driver._state.native_builder.join()
    assert not driver.native_pending()
    add((3, 1, 1), args)  # takes the native launcher on this launch
    add((4, 1, 1), args)  # and its fast path from then on
    assert add._native is native_module and add._plan is not None and "native launch" in repr(add)
    assert [launch.grid for launch in fake_driver.launches] == [(3, 1, 1), (3, 1, 1), (4, 1, 1)]
    assert len({tuple(launch.arguments) for launch in fake_driver.launches}) == 1
    assert driver.launch_path() == "native (C extension calling cuLaunchKernel): built by the test"


def test_a_cooperative_launcher_launches_cooperatively_on_every_path(fake, fake_driver):
    fake_driver.gpus = [FakeGpu()]
    fake_driver.images[IMAGE] = {"add_kernel": Kernel((8, 8, 8, 4))}
    add = Launcher(IMAGE, "add_kernel", ADD_PARAMS, num_warps=4, cooperative=True)
    args = [Tensor(0x1000, 0), Tensor(0x2000, 0), Tensor(0x3000, 0), 1000]
    for _ in range(3):  # the native path (where installed) never takes it: it calls cuLaunchKernel
        add((4, 1, 1), args)
    assert [launch.cooperative for launch in fake_driver.launches] == [True] * 3
    assert add._plan is None and add.make_dispatcher(lambda *a: None) is None and not add.dispatcher_pending()
    with pytest.raises(LaunchError, match=r"kernel 'add_kernel': launch_cooperative_grid=True needs every program of "
                                          r"the grid resident at once, and this GPU cannot hold 133 programs of 128 "
                                          r"threads"):
        add((133, 1, 1), args)


def test_launch_passes_grid_block_and_arguments(add, fake_driver):
    add((3, 1, 1), [Tensor(0x1000, 0), Tensor(0x2000, 0), Tensor(0x3000, 0), 1000])
    (launch,) = fake_driver.launches
    assert (launch.function, launch.grid, launch.block, launch.shared) == ("add_kernel", (3, 1, 1), (128, 1, 1), 0)
    assert launch.arguments == [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x2000), struct.pack("<Q", 0x3000),
                                struct.pack("<i", 1000)]


def test_kernel_runs_on_the_device_of_its_arguments(add, fake_driver):
    add((1, 1, 1), [Tensor(0x1000, 1), Tensor(0x2000, 1), None, 4])
    assert fake_driver.launches[-1].context == 0x1001
    add((1, 1, 1), [Tensor(0x1000, 0), Tensor(0x2000, 0), None, 4])
    assert fake_driver.launches[-1].context == 0x1000
    add((1, 1, 1), [Tensor(0x1000, 1), Tensor(0x2000, 1), None, 4])
    assert fake_driver.launches[-1].context == 0x1001
    assert [context for context, _ in fake_driver.loaded] == [0x1001, 0x1000]  # loaded once per device


def test_without_device_arguments_the_current_device_runs_it(add, fake_driver):
    fake_driver.current = fake_driver.cuDevicePrimaryCtxRetain(1)[1]
    add((1, 1, 1), [None, None, None, 0])
    assert fake_driver.launches[-1].context == 0x1001


def test_cuda_array_interface_arguments_ask_the_driver(add, fake_driver):
    fake_driver.allocations = [(0x10000, 0x20000, 1)]
    add((1, 1, 1), [CaiArray(0x10000), CaiArray(0x10100), CaiArray(0x10200), 64])
    assert fake_driver.launches[-1].context == 0x1001
    with pytest.raises(LaunchError, match=r"kernel 'add_kernel': argument 'y_ptr' points to 0x50000, which is not GPU"):
        add((1, 1, 1), [CaiArray(0x10000), CaiArray(0x50000), CaiArray(0x10200), 64])


def test_empty_grid_launches_nothing(add, fake_driver):
    add((0, 1, 1), [None, None, None, 0])
    assert fake_driver.launches == []


@pytest.mark.parametrize("grid, message", [
    ((-1, 1, 1), r"grid \(-1, 1, 1\): axis 0 must be a non-negative integer, got -1"),
    ((1, 70000, 1), r"grid \(1, 70000, 1\): axis 1 has 70000 blocks, more than the 65535 CUDA allows"),
    ((2**31, 1, 1), r"grid \(2147483648, 1, 1\): axis 0 has 2147483648 blocks, more than the 2147483647 CUDA allows"),
])
def test_bad_grid(add, grid, message):
    with pytest.raises(LaunchError, match=f"kernel 'add_kernel': {message}"):
        add(grid, [None, None, None, 0])


def test_torch_arguments_launch_on_torchs_current_stream(add, fake_driver, monkeypatch):
    fake_torch = types.ModuleType("torch")
    fake_torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0xBEEF0 + device)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(polytile_args, "_current_raw_stream", None)
    add((1, 1, 1), [Tensor(0x1000, 1), None, None, 1])
    assert fake_driver.launches[-1].stream == 0xBEEF1
    add((1, 1, 1), [CaiArray(0), None, None, 1])  # no torch tensor: the default stream
    assert fake_driver.launches[-1].stream == 0
    add((1, 1, 1), [Tensor(0x1000, 1), None, None, 1], stream=0x777)
    assert fake_driver.launches[-1].stream == 0x777


def test_launch_failure_names_kernel_and_call(add, fake_driver):
    fake_driver.launch_result = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(CudaDriverError) as info:
        add((1, 1, 1), [Tensor(0x1000, 0), None, None, 1])
    assert str(info.value).startswith("kernel 'add_kernel': CUDA driver call cuLaunchKernel failed on device 0 with "
                                      "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")


def test_argument_errors_name_the_argument(add):
    with pytest.raises(LaunchError, match=r"kernel 'add_kernel': argument 'n' is int 4294967296, but parameter 'n' "
                                          r"is i32"):
        add((1, 1, 1), [None, None, None, 2**32])
    with pytest.raises(LaunchError, match=r"kernel 'add_kernel': argument 'x_ptr' is a NumPy array"):
        add((1, 1, 1), [np.zeros(4, np.float32), None, None, 4])


def test_dynamic_shared_memory_is_opted_in_on_first_launch_per_device(fake, fake_driver):
    fake_driver.gpus = [FakeGpu(), FakeGpu()]
    fake_driver.images[IMAGE] = {"k": Kernel((8,))}
    launch = Launcher(IMAGE, "k", [("p", F32_PTR)], num_warps=8, shared=100_000)
    launch((1, 1, 1), [Tensor(0x10, 0)])
    launch((1, 1, 1), [Tensor(0x10, 0)])
    launch((1, 1, 1), [Tensor(0x10, 1)])
    assert fake_driver.set_attributes == [("k", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 100_000)] * 2
    assert [launch.shared for launch in fake_driver.launches] == [100_000] * 3


def test_too_much_shared_memory_fails_before_launching(fake, fake_driver):
    fake_driver.images[IMAGE] = {"k": Kernel((8,))}
    launch = Launcher(IMAGE, "k", [("p", F32_PTR)], num_warps=4, shared=300_000)
    with pytest.raises(OutOfResourcesError, match=r"kernel 'k' needs 300000 bytes of shared memory per block, but "
                                                  r"device 0 \(NVIDIA H100 80GB HBM3\) allows at most 232448"):
        launch((1, 1, 1), [Tensor(0x10, 0)])
    assert fake_driver.launches == []


def test_num_warps_must_fit_a_block():
    with pytest.raises(LaunchError, match=r"num_warps=64 gives a block of 2048 threads"):
        Launcher(IMAGE, "k", [], num_warps=64)


# -- the native fast path ----------------------------------------------------------------


@pytest.fixture
def native_add(fake_driver, native_module, monkeypatch):
    use_native_launcher(fake_driver, native_module, monkeypatch)
    fake_driver.gpus = [FakeGpu(), FakeGpu()]
    fake_driver.images[IMAGE] = {"add_kernel": Kernel((8, 8, 8, 4))}
    launcher = Launcher(IMAGE, "add_kernel", ADD_PARAMS, num_warps=4)
    launcher((1, 1, 1), [Tensor(0x1000, 0), None, None, 1])  # loads it on device 0
    return launcher


def _python_packer_refused(launcher, monkeypatch):
    def refuse(args):
        raise AssertionError("the launch took the Python path")

    monkeypatch.setattr(launcher.packer, "pack", refuse)


def test_native_path_packs_and_launches_in_one_call(native_add, fake_driver, monkeypatch):
    _python_packer_refused(native_add, monkeypatch)
    native_add((5, 2, 1), (Tensor(0x1000, 0), Tensor(0x2000, 0), None, -7))
    launch = fake_driver.launches[-1]
    assert (launch.grid, launch.block, launch.context) == ((5, 2, 1), (128, 1, 1), 0x1000)
    assert launch.arguments == [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x2000), struct.pack("<Q", 0),
                                struct.pack("<i", -7)]


def test_native_path_packs_every_scalar_as_struct_does(fake_driver, native_module, monkeypatch):
    use_native_launcher(fake_driver, native_module, monkeypatch)
    kinds = [("a", t.i1, "<B", True), ("b", t.i8, "<b", -128), ("c", t.u16, "<H", 65535), ("d", t.i64, "<q", -2**63),
             ("e", t.u64, "<Q", 2**64 - 1), ("f", t.f16, "<e", 1.5), ("g", t.f32, "<f", 3), ("h", t.f64, "<d", 0.1),
             ("p", F32_PTR, "<Q", None)]
    fake_driver.images[IMAGE] = {"k": Kernel(tuple(struct.calcsize(code) for _, _, code, _ in kinds))}
    launcher = Launcher(IMAGE, "k", [(name, type_) for name, type_, _, _ in kinds], num_warps=1)
    values = [value for *_, value in kinds]
    launcher((1, 1, 1), values[:-1] + [Tensor(0x40, 0)])
    _python_packer_refused(launcher, monkeypatch)
    launcher((1, 1, 1), values[:-1] + [Tensor(0x40, 0)])
    expected = [struct.pack(code, value if value is not None else 0x40) for _, _, code, value in kinds]
    assert fake_driver.launches[-1].arguments == fake_driver.launches[-2].arguments == expected


def test_native_path_restores_a_context_another_library_switched(native_add, fake_driver):
    fake_driver.current = fake_driver.cuDevicePrimaryCtxRetain(1)[1]
    native_add((1, 1, 1), [Tensor(0x1000, 0), None, None, 1])
    assert fake_driver.launches[-1].context == 0x1000
    assert fake_driver.calls[-1] == "cuCtxSetCurrent(0x1000)"


@pytest.mark.parametrize("args, message", [
    ([None, None, None, 2**31], r"argument 'n' is int 2147483648, but parameter 'n' is i32"),
    ([None, None, None, 1.5], r"argument 'n' is float 1.5, but parameter 'n' is i32"),
    ([Tensor(0x1000, None), None, None, 1], r"argument 'x_ptr' is a torch tensor on 'cpu'"),
    ([Tensor(0x1000, 0), Tensor(0x2000, 1), None, 1], r"argument 'y_ptr' is on cuda:1, but argument 'x_ptr' is on "
                                                      r"cuda:0"),
    ([None, None, None], r"kernel 'add_kernel' takes 4 run-time arguments \(x_ptr, y_ptr, out_ptr, n\), got 3"),
])
def test_native_path_leaves_mistakes_to_the_python_path(native_add, fake_driver, args, message):
    launches = len(fake_driver.launches)
    with pytest.raises(LaunchError, match=message):
        native_add((1, 1, 1), args)
    assert len(fake_driver.launches) == launches


def test_native_path_reports_driver_errors(native_add, fake_driver):
    fake_driver.launch_result = CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
    with pytest.raises(CudaDriverError, match=r"kernel 'add_kernel': CUDA driver call cuLaunchKernel failed with "
                                              r"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"):
        native_add((1, 1, 1), [Tensor(0x1000, 0), None, None, 1])


def test_native_launches_from_threads_keep_their_own_arguments(native_add, fake_driver, monkeypatch):
    import threading

    _python_packer_refused(native_add, monkeypatch)

    def launch_many(thread):
        for i in range(50):
            address = 0x10000 * (thread + 1) + 16 * i
            native_add((1, 1, 1), [Tensor(address, 0), None, None, address])

    threads = [threading.Thread(target=launch_many, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    launches = fake_driver.launches[1:]
    assert len(launches) == 200
    for launch in launches:
        address = struct.unpack("<Q", launch.arguments[0])[0]
        assert struct.unpack("<i", launch.arguments[3])[0] == address


# -- on a GPU --------------------------------------------------------------------------


def _cubin(ptx: str, name: str, gpu) -> bytes:
    from polytile_nvidia.assemble import ptx_to_cubin

    return ptx_to_cubin(ptx, gpu.target.arch, kernel_name=name, assembler="auto")


@pytest.mark.gpu
def test_vector_add_with_torch_tensors(nvidia_gpu):
    torch = torch_cuda()
    device = f"cuda:{nvidia_gpu.index}"
    n = 1000
    x = torch.rand(n, device=device)
    y = torch.rand(n, device=device)
    out = torch.full((n,), -1.0, device=device)
    launch = Launcher(_cubin(VECTOR_ADD, "add_kernel", nvidia_gpu), "add_kernel", ADD_PARAMS, num_warps=4)
    launch(((n + 127) // 128, 1, 1), [x, y, out, n])
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


@pytest.mark.gpu
def test_vector_add_on_a_side_stream(nvidia_gpu):
    torch = torch_cuda()
    device = f"cuda:{nvidia_gpu.index}"
    n = 1 << 20
    x = torch.rand(n, device=device)
    y = torch.rand(n, device=device)
    launch = Launcher(_cubin(VECTOR_ADD, "add_kernel", nvidia_gpu), "add_kernel", ADD_PARAMS, num_warps=8)
    stream = torch.cuda.Stream(device=device)
    with torch.cuda.stream(stream):
        out = torch.empty(n, device=device)
        launch((n // 256, 1, 1), [x, y, out, n])
        expected = x + y  # ordered after the kernel only if it went on this stream
        same = torch.equal(out, expected)
    stream.synchronize()
    assert same


@pytest.mark.gpu
def test_vector_add_with_cuda_array_interface(nvidia_gpu):
    from polytile_nvidia import driver

    driver.activate(nvidia_gpu.index)
    n = 300
    x_host = np.arange(n, dtype=np.float32)
    y_host = np.full(n, 0.5, dtype=np.float32)
    buffers = [DeviceBuffer(4 * n) for _ in range(3)]
    try:
        buffers[0].upload(x_host.tobytes())
        buffers[1].upload(y_host.tobytes())
        launch = Launcher(_cubin(VECTOR_ADD, "add_kernel", nvidia_gpu), "add_kernel", ADD_PARAMS, num_warps=2)
        launch(((n + 63) // 64, 1, 1), [*buffers, n])
        out = np.frombuffer(buffers[2].download(), dtype=np.float32)  # cuMemcpyDtoH waits for the kernel
        np.testing.assert_array_equal(out, x_host + y_host)
    finally:
        for buffer in buffers:
            buffer.free()


@pytest.mark.gpu
def test_every_scalar_type_arrives_intact(nvidia_gpu):
    from polytile_nvidia import driver

    driver.activate(nvidia_gpu.index)
    params = [("out", t.PointerType(t.u64)), ("a", t.i8), ("b", t.i16), ("c", t.i32), ("d", t.i64), ("e", t.f16),
              ("f", t.bf16), ("g", t.f32), ("h", t.f64), ("i", t.i1)]
    out = DeviceBuffer(9 * 8, "<u8", 8)
    try:
        launch = Launcher(_cubin(SCALARS, "scalars", nvidia_gpu), "scalars", params, num_warps=1)
        launch((1, 1, 1), [out, -5, -300, -70000, -(2**40), 1.5, -2.0, 3.25, -1e300, True])
        got = np.frombuffer(out.download(), dtype=np.uint64).tolist()
    finally:
        out.free()
    assert got == [0xFB, 0xFED4, (-70000) & 0xFFFFFFFF, (-(2**40)) & (2**64 - 1),
                   int(np.float16(1.5).view(np.uint16)), 0xC000,
                   struct.unpack("<I", struct.pack("<f", 3.25))[0], struct.unpack("<Q", struct.pack("<d", -1e300))[0], 1]


@pytest.mark.gpu
def test_dynamic_shared_memory_above_48k(nvidia_gpu):
    torch = torch_cuda()
    shared = 100 * 1024
    out = torch.zeros(1, dtype=torch.int32, device=f"cuda:{nvidia_gpu.index}")
    params = [("out", t.PointerType(t.i32)), ("nbytes", t.u32)]
    launch = Launcher(_cubin(DYNAMIC_SHARED, "shared_probe", nvidia_gpu), "shared_probe", params, num_warps=4,
                      shared=shared)
    launch((1, 1, 1), [out, shared])
    torch.cuda.synchronize()
    assert out.item() == 42
    limit = nvidia_gpu.properties["shared_memory_per_block_optin"]
    too_much = Launcher(_cubin(DYNAMIC_SHARED, "shared_probe", nvidia_gpu), "shared_probe", params, num_warps=4,
                        shared=limit + 1024)
    with pytest.raises(OutOfResourcesError, match=f"allows at most {limit}"):
        too_much((1, 1, 1), [out, limit + 1024])


@pytest.mark.gpu
def test_cpu_tensor_is_refused(nvidia_gpu):
    torch = torch_cuda()
    x = torch.zeros(4, device=f"cuda:{nvidia_gpu.index}")
    launch = Launcher(_cubin(VECTOR_ADD, "add_kernel", nvidia_gpu), "add_kernel", ADD_PARAMS, num_warps=1)
    with pytest.raises(LaunchError, match=r"kernel 'add_kernel': argument 'y_ptr' is a torch tensor on 'cpu'"):
        launch((1, 1, 1), [x, torch.zeros(4), x, 4])


@pytest.mark.gpu
def test_tensors_on_two_gpus_are_refused(nvidia_gpu):
    torch = torch_cuda()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    launch = Launcher(_cubin(VECTOR_ADD, "add_kernel", nvidia_gpu), "add_kernel", ADD_PARAMS, num_warps=1)
    a, b = torch.zeros(4, device="cuda:0"), torch.zeros(4, device="cuda:1")
    with pytest.raises(LaunchError, match=r"argument 'y_ptr' is on cuda:1, but argument 'x_ptr' is on cuda:0"):
        launch((1, 1, 1), [a, b, a, 4])
    out = torch.empty(4, device="cuda:1")
    launch((1, 1, 1), [b, b, out, 4])  # runs on GPU 1, where its arguments are
    torch.cuda.synchronize(1)
    assert torch.equal(out, b + b)



@pt.jit
def add_through_protocols(x, y, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


class _DLPackOnly:
    """Device memory offered only through DLPack, as a CuPy or JAX array offers it."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack__(self, stream=None):
        return self._tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()


class _CudaArrayInterfaceOnly:
    """Device memory offered only through ``__cuda_array_interface__``, as CuPy and Numba
    offer it."""

    def __init__(self, tensor):
        self._tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


@pytest.mark.gpu
@pytest.mark.parametrize("wrap", [_DLPackOnly, _CudaArrayInterfaceOnly], ids=["dlpack", "cuda_array_interface"])
def test_kernels_launch_on_arrays_of_other_libraries(nvidia_gpu, wrap):
    # Through the public launch path (specialization, alignment, device choice), on real
    # device memory that is neither a torch tensor nor a NumPy array.
    torch = torch_cuda()
    device = f"cuda:{nvidia_gpu.index}"
    n = 1000
    x = torch.arange(n, dtype=torch.float32, device=device)
    y = torch.full((n,), 0.25, dtype=torch.float32, device=device)
    out = torch.zeros(n, dtype=torch.float32, device=device)
    add_through_protocols[(pt.cdiv(n, 256),)](wrap(x), wrap(y), wrap(out), n, BLOCK=256, target="nvidia")
    torch.cuda.synchronize()
    assert torch.equal(out, x + y)


@pytest.mark.gpu
def test_kernels_run_on_the_device_holding_their_arguments(nvidia_gpu):
    # Needs two GPUs (the nvidia-h200-x2 machine; one GPU skips it, visibly).
    torch = torch_cuda()
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two NVIDIA GPUs, this machine has {torch.cuda.device_count()}")
    n = 4096
    for device in (1, 0, 1):  # the current device stays 0: the arguments decide
        x = torch.arange(n, dtype=torch.float32, device=f"cuda:{device}")
        y = torch.full((n,), 2.0, dtype=torch.float32, device=f"cuda:{device}")
        out = torch.zeros(n, dtype=torch.float32, device=f"cuda:{device}")
        add_through_protocols[(pt.cdiv(n, 512),)](x, y, out, n, BLOCK=512, target="nvidia")
        torch.cuda.synchronize(device)
        assert torch.equal(out, x + y), device
        assert torch.cuda.current_device() == 0
    mixed = torch.zeros(n, dtype=torch.float32, device="cuda:0")
    with pytest.raises(LaunchError, match="'out'"):
        add_through_protocols[(pt.cdiv(n, 512),)](x, y, mixed, n, BLOCK=512, target="nvidia")
