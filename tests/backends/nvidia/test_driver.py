"""The CUDA driver layer: contexts, module loading, device properties, shared memory opt-in.

Most tests run against :class:`~.fake_cuda.FakeDriver`; those marked ``gpu`` load the
hand-written PTX on a real device and skip cleanly without one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polytile.runtime.jit import LaunchError
from polytile_nvidia import driver
from polytile_nvidia.driver import CudaDriverError, OutOfResourcesError, load_module

from .fake_cuda import FakeGpu, Kernel, fake_driver, nvidia_gpu  # noqa: F401 (fixtures)
from .ptx_kernels import DYNAMIC_SHARED, VECTOR_ADD

IMAGE = b"\x7fELF fake cubin"


def test_primary_context_is_retained_once_per_device(fake_driver):
    fake_driver.gpus = [FakeGpu(), FakeGpu()]
    assert int(driver.primary_context(1)) == 0x1001
    assert int(driver.primary_context(1)) == 0x1001
    assert int(driver.primary_context(0)) == 0x1000
    assert fake_driver.retained == [1, 0]
    assert fake_driver.calls.count("cuInit") == 1


def test_activate_sets_the_context_only_when_another_is_current(fake_driver):
    driver.activate(0)
    driver.activate(0)
    assert fake_driver.calls.count("cuCtxSetCurrent(0x1000)") == 1
    assert driver.current_device() == 0


def test_a_driver_library_that_fails_to_load_at_cuinit_says_so(monkeypatch):
    from polytile.backend import BackendUnavailable

    from .fake_cuda import FakeDriver

    fake = FakeDriver()

    def cuInit(flags):
        raise RuntimeError("libcuda.so.1: cannot open shared object file")

    fake.cuInit = cuInit
    monkeypatch.setattr(driver, "_state", driver._State(fake))
    with pytest.raises(BackendUnavailable, match="^CUDA driver not found: libcuda.so.1: cannot open shared object "
                                                 "file; NVIDIA kernels compile without it, but launching one needs "
                                                 "the CUDA driver and an NVIDIA GPU$"):
        driver.current_device()


def test_the_driver_is_the_core_driver_with_cuda_calls():
    from polytile.device_driver import Driver, Function, Module
    from polytile.errors import DriverError, DriverOutOfResourcesError

    assert isinstance(driver._state, Driver) and driver._State is driver.CudaDriver
    assert issubclass(driver.Module, Module) and issubclass(driver.Function, Function)
    assert issubclass(CudaDriverError, DriverError)
    assert issubclass(driver.LaunchOutOfResourcesDriverError, DriverOutOfResourcesError)
    assert issubclass(driver.LaunchOutOfResourcesDriverError, OutOfResourcesError)


def test_unknown_device_index(fake_driver):
    with pytest.raises(LaunchError, match=r"there is no CUDA device 3: this process sees 1 \(device 0; "):
        driver.primary_context(3)


def test_device_properties_are_read_once(fake_driver):
    props = driver.device_properties(0)
    assert props == driver.DeviceProperties(index=0, name="NVIDIA H100 80GB HBM3", compute_capability=(9, 0),
                                            multiprocessor_count=132, warp_size=32, max_threads_per_block=1024,
                                            shared_memory_per_block=49152, shared_memory_per_block_optin=232448)
    fake_driver.gpus[0].sms = 1
    assert driver.device_properties(0).multiprocessor_count == 132


def test_load_module_and_find_function(fake_driver):
    fake_driver.images[IMAGE] = {"add_kernel": Kernel((8, 8, 8, 4), num_regs=20)}
    module = load_module(IMAGE, device=0, name="add_kernel")
    function = module.function("add_kernel")
    assert module.function("add_kernel") is function
    assert (function.num_registers, function.static_shared_bytes, function.max_threads_per_block) == (20, 0, 1024)
    assert fake_driver.loaded == [(0x1000, IMAGE)]  # loaded with device 0's context current


def test_ptx_text_is_nul_terminated(fake_driver):
    fake_driver.images[VECTOR_ADD.encode()] = {"add_kernel": Kernel((8, 8, 8, 4))}
    load_module(VECTOR_ADD, device=0)
    assert fake_driver.loaded[0][1] == VECTOR_ADD.encode() + b"\0"


def test_load_failure_names_call_kernel_and_reason(fake_driver):
    with pytest.raises(CudaDriverError) as info:
        load_module(b"\x7fELF for another GPU", device=0, name="add_kernel")
    assert str(info.value) == (
        "kernel 'add_kernel': CUDA driver call cuModuleLoadData failed on device 0 with CUDA_ERROR_NO_BINARY_FOR_GPU "
        "(fake description of CUDA_ERROR_NO_BINARY_FOR_GPU): the cubin was built for another architecture than "
        "this device's")
    assert (info.value.call, info.value.error, info.value.kernel) == ("cuModuleLoadData", "CUDA_ERROR_NO_BINARY_FOR_GPU",
                                                                      "add_kernel")


def test_missing_function_is_named(fake_driver):
    fake_driver.images[IMAGE] = {"add_kernel": Kernel(())}
    module = load_module(IMAGE, device=0)
    with pytest.raises(CudaDriverError, match=r"kernel 'mul_kernel': CUDA driver call cuModuleGetFunction\('mul_kernel'\)"):
        module.function("mul_kernel")


def test_shared_memory_below_48k_needs_no_opt_in(fake_driver):
    fake_driver.images[IMAGE] = {"k": Kernel(())}
    load_module(IMAGE, device=0).function("k").set_dynamic_shared_memory(48 * 1024)
    assert fake_driver.set_attributes == []


def test_shared_memory_above_48k_opts_in(fake_driver):
    fake_driver.images[IMAGE] = {"k": Kernel((), static_shared=1024)}
    function = load_module(IMAGE, device=0).function("k")
    function.set_dynamic_shared_memory(100 * 1024)
    function.set_dynamic_shared_memory(90 * 1024)  # already allowed: no second call
    assert fake_driver.set_attributes == [("k", "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 100 * 1024)]


def test_shared_memory_beyond_the_device_limit_is_an_error(fake_driver):
    fake_driver.gpus = [FakeGpu("NVIDIA A100-SXM4-80GB", (8, 0), 108, 166912)]
    fake_driver.images[IMAGE] = {"matmul": Kernel((), static_shared=2048)}
    function = load_module(IMAGE, device=0).function("matmul")
    with pytest.raises(OutOfResourcesError) as info:
        function.set_dynamic_shared_memory(200 * 1024)
    assert str(info.value) == (
        "kernel 'matmul' needs 206848 bytes of shared memory per block (2048 static + 204800 dynamic), but device 0 "
        "(NVIDIA A100-SXM4-80GB) allows at most 166912; use smaller blocks or fewer pipeline stages (num_stages)")
    assert (info.value.required, info.value.limit, info.value.resource) == (206848, 166912, "shared memory")
    assert fake_driver.set_attributes == []


def test_block_larger_than_registers_allow(fake_driver):
    fake_driver.images[IMAGE] = {"k": Kernel((), num_regs=128, max_threads=512)}
    function = load_module(IMAGE, device=0).function("k")
    function.check_block_size(512)
    with pytest.raises(OutOfResourcesError, match=r"kernel 'k': a block of 1024 threads is too large on device 0: "
                                                  r"the kernel uses 128 registers per thread"):
        function.check_block_size(1024)


def test_pointer_device(fake_driver):
    fake_driver.allocations = [(0x10000, 0x20000, 1)]
    assert driver.device_of_pointer(0x18000) == 1
    assert driver.device_of_pointer(0x30000) is None


# -- the choice of launch path -----------------------------------------------------------


@pytest.fixture
def real_looking_bindings(fake_driver, monkeypatch):
    """Bindings that pass for cuda.bindings.driver, so that the native launcher is tried."""
    import types

    module = types.ModuleType("cuda.bindings.driver")
    monkeypatch.setattr(driver, "_state", driver._State(module))
    return module


def test_a_test_double_of_the_bindings_launches_through_it(fake_driver):
    assert driver.native_launcher() is None
    assert driver.launch_path() == ("cuda-bindings cuLaunchKernel: the CUDA bindings in use are not "
                                    "cuda.bindings.driver (a test double?)")


def test_the_setting_can_ask_for_cuda_bindings(real_looking_bindings):
    from polytile import config

    with config.override(nvidia_launch="bindings"):
        assert driver.native_launcher() is None
    # The bindings pass for cuda.bindings.driver, so the path says the driver calls go there.
    assert driver.launch_path() == ("cuda-bindings cuLaunchKernel: the setting nvidia_launch is 'bindings'; "
                                    "driver calls through cuda.bindings.driver")


def test_the_install_built_the_launch_module():
    import importlib.machinery

    from polytile.runtime.launcher import c_compiler

    if driver._UNBUILT_MARKER.exists() and c_compiler() is None:
        pytest.skip(f"this machine has no C compiler: {driver._UNBUILT_MARKER.read_text().strip()}")
    from polytile_nvidia import _launch  # built by pip from backends/nvidia/setup.py

    assert isinstance(_launch.__loader__, importlib.machinery.ExtensionFileLoader)
    assert Path(_launch.__file__).parent == Path(driver.__file__).parent
    assert any(_launch.__file__.endswith(suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES)
    assert _launch.source_digest == driver.source_digest()  # built from the sources next to it
    assert driver.installed_module() == (_launch, "")


@pytest.fixture
def not_installed(real_looking_bindings, monkeypatch, tmp_path):
    """No installed launch module (the reason: the marker setup.py leaves), and no C compiler."""
    from polytile.runtime import launcher as base

    real_import = driver.importlib.import_module

    def without_the_module(name, *args):
        if name == driver.NATIVE_MODULE:
            raise ImportError(f"No module named '{name}'")
        return real_import(name, *args)

    marker = tmp_path / "_launch.unbuilt"
    marker.write_text("the C compiler failed on _launch.c at install: command 'gcc' failed\n")
    monkeypatch.setattr(driver.importlib, "import_module", without_the_module)
    monkeypatch.setattr(driver, "_UNBUILT_MARKER", marker)
    monkeypatch.setattr(base, "c_compiler", lambda: None)
    return marker


def test_without_the_installed_module_auto_falls_back_and_says_why(not_installed, tmp_path):
    from polytile import config

    with config.override(nvidia_launch="auto", cache_dir=str(tmp_path)):
        assert driver.native_launcher() is None
    assert driver.launch_path() == (
        "cuda-bindings cuLaunchKernel: the native launcher cannot be used: polytile-nvidia was installed without its "
        "native launch module: the C compiler failed on _launch.c at install: command 'gcc' failed; and it cannot be "
        "built at run time: no C compiler found (looked for $CC, cc, gcc and clang); driver calls through "
        "cuda.bindings.driver")


def test_without_the_installed_module_native_is_an_error(not_installed, tmp_path):
    from polytile import config

    with config.override(nvidia_launch="native", cache_dir=str(tmp_path)):
        with pytest.raises(LaunchError, match=r"the setting nvidia_launch is 'native', but the native launcher cannot "
                                              r"be used: polytile-nvidia was installed without .* no C compiler found .*"
                                              r" set nvidia_launch to 'auto'"):
            driver.native_launcher()


def test_an_installed_module_older_than_its_source_is_not_used(monkeypatch, tmp_path):
    pytest.importorskip("polytile_nvidia._launch", reason="the install did not build the launch module")
    for name in ("_launch.c", "_dispatch.h"):
        (tmp_path / name).write_bytes(driver._NATIVE_SOURCE.with_name(name).read_bytes())
    with (tmp_path / "_dispatch.h").open("a") as header:
        header.write("/* edited since the install */\n")
    monkeypatch.setattr(driver, "_NATIVE_SOURCE", tmp_path / "_launch.c")
    monkeypatch.setattr(driver, "_state", driver._State())
    module, why = driver.installed_module()
    assert module is None
    assert "was built from another _launch.c than the one next to it: reinstall polytile-nvidia" in why


def test_only_a_module_neither_installed_nor_cached_is_built_in_the_background(real_looking_bindings, tmp_path,
                                                                               monkeypatch):
    from polytile import config
    from polytile.runtime.launcher import NativeBuildError, native_module_path

    with config.override(nvidia_launch="auto", cache_dir=str(tmp_path)):
        if driver.installed_module()[0] is not None:
            assert not driver._build_in_background()  # the installed module: nothing to build
        monkeypatch.setattr(driver, "installed_module", lambda: (None, "the test removed it"))
        try:
            _, _, built = native_module_path(driver.NATIVE_MODULE, driver._NATIVE_SOURCE, tmp_path / "native",
                                             driver._run_time_defines())
        except NativeBuildError as exc:
            pytest.skip(f"the native launcher cannot be built here: {exc}")
        assert driver._build_in_background()
        built.parent.mkdir(parents=True)
        built.write_bytes(b"")
        assert not driver._build_in_background()  # loading a built one is quick
        built.unlink()
    with config.override(nvidia_launch="native", cache_dir=str(tmp_path)):
        assert not driver._build_in_background()  # 'native' waits, and fails loudly


# -- on a GPU --------------------------------------------------------------------------


@pytest.mark.gpu
def test_ptx_and_cubin_load_on_a_gpu(nvidia_gpu):
    from polytile_nvidia.assemble import ptx_to_cubin

    device = nvidia_gpu.index
    from_ptx = load_module(VECTOR_ADD, device=device, name="add_kernel").function("add_kernel")
    cubin = ptx_to_cubin(VECTOR_ADD, nvidia_gpu.target.arch, kernel_name="add_kernel", assembler="auto")
    from_cubin = load_module(cubin, device=device, name="add_kernel").function("add_kernel")
    for function in (from_ptx, from_cubin):
        assert 0 < function.num_registers <= 255
        assert function.max_threads_per_block >= 256


@pytest.mark.gpu
def test_device_properties_on_a_gpu(nvidia_gpu):
    props = driver.device_properties(nvidia_gpu.index)
    assert props.compute_capability == nvidia_gpu.properties["compute_capability"]
    assert props.multiprocessor_count == nvidia_gpu.properties["multiprocessor_count"]
    assert props.shared_memory_per_block_optin == nvidia_gpu.properties["shared_memory_per_block_optin"]
    assert (props.warp_size, props.shared_memory_per_block) == (32, 49152)


@pytest.mark.gpu
def test_shared_memory_opt_in_on_a_gpu(nvidia_gpu):
    function = load_module(DYNAMIC_SHARED, device=nvidia_gpu.index).function("shared_probe")
    limit = driver.device_properties(nvidia_gpu.index).shared_memory_per_block_optin
    function.set_dynamic_shared_memory(limit)
    with pytest.raises(OutOfResourcesError):
        function.set_dynamic_shared_memory(limit + 16)


def test_the_backend_reports_its_launch_path_for_polytile_info(fake_driver):
    from polytile_nvidia.backend import NvidiaBackend

    assert NvidiaBackend().launch_path() == driver.launch_path()
    assert NvidiaBackend().launch_path().startswith("cuda-bindings cuLaunchKernel: ")


def test_the_run_time_fallback_builds_the_same_module_with_its_source_digest(tmp_path, monkeypatch):
    import types

    from polytile import config
    from polytile.runtime.launcher import c_compiler

    if c_compiler() is None:
        pytest.skip("no C compiler on this machine")
    with config.override(cache_dir=str(tmp_path)):
        module = driver._build_at_run_time("the test removed the installed one")
    assert module.__name__ == driver.NATIVE_MODULE and hasattr(module, "Dispatcher")
    assert Path(module.__file__).parent == tmp_path / "native"
    assert module.source_digest == driver.source_digest()  # so it passes the staleness check too
    with config.override(cache_dir=str(tmp_path)):
        monkeypatch.setattr(driver, "_state", driver._State(types.ModuleType("cuda.bindings.driver")))
        monkeypatch.setattr(driver, "installed_module", lambda: (None, "the test removed the installed one"))
        with config.override(nvidia_launch="auto"):
            assert not driver._build_in_background()  # the one just built is found: nothing to wait for
