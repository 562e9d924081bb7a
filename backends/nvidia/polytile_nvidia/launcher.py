"""Launching a compiled NVIDIA kernel: ``launcher(grid, args)``.

A :class:`Launcher` is built once per compiled specialization from the cubin, the
kernel's run-time parameters and its launch configuration.  Everything that can be
decided then is: the argument layout (:class:`~.arguments.ArgumentPacker`), the block
size, the shared memory.  The module is loaded on a device the first time the kernel
runs there, and dynamic shared memory above 48 KB is opted in at that moment.

Per launch: the device is the one holding the pointer arguments (else the current one),
that device's primary context is made current if it is not, and the kernel goes on the
caller's stream: PyTorch's current stream when an argument is a torch tensor, else the
legacy default stream (0), unless ``stream=`` names one.

Two paths do this.  The fast one is one call into the native launcher (``_launch.c``):
it packs the common arguments (Python numbers, None, torch tensors) on its own stack,
checks the current context (always: another library may have switched it, and asking
costs nanoseconds in C) and calls cuLaunchKernel; nothing is shared between launches,
so it takes no lock.  Everything else, every mistake included, goes through the general
path of :class:`~polytile.runtime.launcher.LauncherBase`, which packs into the
packer's buffer under the lock, names the argument at fault, and loads the kernel on a
new device.  Without the native launcher, the general path is the only one and launches
through cuda-bindings.

In front of both, a ``@jit`` function may launch through the launch module's
*dispatcher* (:mod:`polytile.runtime.dispatch`): ``kernel[grid](...)`` checked, packed
and launched in one C call, no Python of ours at all.  Every launcher counts its
launches by path, and the Python ones by why they were not the dispatcher's
(:meth:`Launcher.launch_counts`, :func:`launch_counts`).
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple, Sequence

from polytile.errors import LaunchError
from polytile.ir.types import Type
from polytile.runtime.args import torch_stream_function
from polytile.runtime.launcher import LauncherBase

from . import driver
from .arguments import TORCH_TYPES, ArgumentPacker

#: Grid limits of every supported architecture (sm_80 to sm_90a).
MAX_GRID = (2**31 - 1, 65535, 65535)
_WARP_SIZE = 32
#: The native launcher's calls, by the number it reports a driver failure with.
_NATIVE_CALLS = {1: "cuCtxGetCurrent", 2: "cuCtxSetCurrent", 3: "cuLaunchKernel"}
#: A dispatch plan's checks, hints and int ranges as ``_launch.c`` numbers them.
_DISPATCH_CHECKS = {"equal": 1, "none": 2, "tensor": 3, "int": 4, "float": 5, "bool": 6, "adapted": 7}
_DISPATCH_HINTS = {"any": 0, "aligned": 1, "unaligned": 2, "one": 3, "divisible": 4, "other": 5}
_DISPATCH_RANGES = {"": 0, "i32": 0, "i64": 1, "u64": 2}
#: The parameter codes each check may pack into ("\0": packs nothing).
_DISPATCH_CODES = {"equal": "\0", "none": "\0", "tensor": "P", "int": "iqQ", "float": "f", "bool": "?"}
#: The launch counters (``_launch.c``'s COUNT_* slots): slot 0 counts the dispatcher's
#: launches, the others the launches through Python, by why.
_COUNT_SLOTS = 8
_COUNT_NATIVE, _COUNT_NO_DISPATCHER, _COUNT_PENDING, _COUNT_NO_NATIVE = 0, 1, 4, 5
#: What each slot of a Python launch means (LaunchCounts.why's keys).
_WHY = {1: "no dispatcher", 2: "no plan matched", 3: "needs Python", 4: "native launcher pending",
        5: "no native launcher"}


class LaunchCounts(NamedTuple):
    """How a kernel's launches went, for benchmarks and tests (see docs/runtime.md).

    ``native``: launched by the native dispatcher, ``kernel[grid](...)`` in one C call.
    ``python``: every other launch (through polytile's Python entry point).  ``why``:
    the Python launches by reason, each one of

    * ``"no dispatcher"``: the ``@jit`` function had none (its first launch, a launch
      through ``fn.run(...)`` or the launcher itself, or one whose calls cannot be planned);
    * ``"no plan matched"``: the dispatcher had no plan for the call (it makes one from
      it while its plan budget lasts);
    * ``"needs Python"``: a plan matched, but only Python can launch the call (an empty
      grid, no tensor argument, a device the kernel is not loaded on yet);
    * ``"native launcher pending"``: the native module was being built at run time;
    * ``"no native launcher"``: launches go through cuda-bindings
      (``polytile_nvidia.driver.launch_path()`` says why).
    """

    native: int
    python: int
    why: dict[str, int]

    def __add__(self, other: Any) -> "LaunchCounts":
        if not isinstance(other, LaunchCounts):
            return NotImplemented
        why = dict(self.why)
        for reason, count in other.why.items():
            why[reason] = why.get(reason, 0) + count
        return LaunchCounts(self.native + other.native, self.python + other.python, why)


def launch_counts(kernel: Any) -> LaunchCounts:
    """The launch counts of ``kernel``: a ``@jit`` function (every specialization it
    compiled for NVIDIA in this process, summed), a compiled kernel, or a launcher."""
    launcher = getattr(kernel, "backend_launcher", kernel)
    if isinstance(launcher, Launcher):
        return launcher.launch_counts()
    cache = getattr(kernel, "cache", None)
    if not isinstance(cache, dict):
        raise TypeError(f"launch_counts takes a @jit function, a compiled kernel or an NVIDIA launcher, got {kernel!r}")
    total = LaunchCounts(0, 0, {})
    for launcher in {id(c.backend_launcher): c.backend_launcher for c in cache.values()
                     if isinstance(getattr(c, "backend_launcher", None), Launcher)}.values():
        total = total + launcher.launch_counts()
    return total


#: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: the grid does not fit on the GPU at once.
_COOPERATIVE_LAUNCH_TOO_LARGE = 720


class Launcher(LauncherBase):
    """Launches one compiled kernel; call it as ``launcher((gx, gy, gz), args)``.

    ``image`` is the cubin (or PTX text); ``parameters`` are the run-time parameters as
    ``(name, IR type)`` pairs in order; ``shared`` is the dynamic shared memory per block
    in bytes.  Calls are thread-safe.
    """

    runtime_name = "CUDA"
    block_word = "blocks"
    #: The native dispatcher calls a kernel's global-scratch allocation itself.
    dispatches_global_scratch = True
    max_grid = MAX_GRID

    def __init__(self, image: bytes | str, kernel_name: str, parameters: Sequence[tuple[str, Type]], *,
                 num_warps: int, shared: int = 0, cooperative: bool = False):
        if num_warps < 1 or num_warps * _WARP_SIZE > 1024:
            raise LaunchError(f"kernel '{kernel_name}': num_warps={num_warps} gives a block of "
                              f"{num_warps * _WARP_SIZE} threads; a block holds 32 to 1024 threads")
        self.packer = ArgumentPacker(kernel_name, parameters)
        super().__init__(kernel_name, self.packer.names)
        self.image = image
        self.num_warps = num_warps
        self.block = num_warps * _WARP_SIZE
        self.shared = shared
        #: Launched by cuLaunchCooperativeKernel through cuda-bindings: the native paths
        #: (which call cuLaunchKernel) are never taken.
        self.cooperative = cooperative
        self._params = self.packer.params_address
        self._functions: dict[int, driver.Function] = {}
        #: The native launcher, chosen at the first launch (making a launcher must work
        #: where there is no driver: compiling for NVIDIA needs none).
        self._native: Any = None
        self._native_launch: Any = None
        #: What the native launcher packs by; None: every launch takes the general path.
        self._plan: bytes | None = None
        #: (CUfunction, CUcontext) per device as 16 bytes, zero where not loaded: the
        #: native launcher's view of the loaded devices, replaced whole on each load.
        self._table = b""
        self._native_types = 0
        #: The native launcher is being built in the background: take it once ready.
        self._awaiting_native = False
        #: The launch counters (LaunchCounts): the C code counts into the bytes too.
        self._counts = bytearray(8 * _COUNT_SLOTS)
        self._count_slots = memoryview(self._counts).cast("Q")

    def __call__(self, grid: tuple[int, int, int], args: Sequence[Any], stream: Any = None) -> None:
        plan = self._plan
        if plan is not None:
            gx, gy, gz = grid
            if 0 < gx <= 2147483647 and 0 < gy <= 65535 and 0 < gz <= 65535:
                result = self._native_launch(plan, self._table, args, gx, gy, gz, stream, self._counts)
                if not result:
                    return
                if result != -1:
                    self._raise_native(result)
        LauncherBase.__call__(self, grid, args, stream)

    # -- the native dispatcher (polytile.runtime.dispatch) ----------------------------------

    def make_dispatcher(self, slow: Any) -> Any:
        if self._native is None:
            if self._awaiting_native:
                self._take_native_when_ready()
            else:
                # Not loaded yet (its first launch failed before loading, say): the native
                # module is the process's, whether or not this kernel ever ran.
                self._choose_native()
        native = self._native
        return native.Dispatcher(slow) if native is not None and hasattr(native, "Dispatcher") else None

    def dispatcher_pending(self) -> bool:
        # Pending until this launcher has taken the native module: asked just after
        # make_dispatcher said none, a build finishing in between must not read as "never".
        return not self.cooperative and self._native is None and (self._awaiting_native or driver.native_pending())

    def launch_counts(self) -> LaunchCounts:
        """How this kernel's launches went so far (see :class:`LaunchCounts`)."""
        slots = self._count_slots.tolist()
        why = {_WHY[slot]: count for slot, count in enumerate(slots) if slot in _WHY and count}
        return LaunchCounts(slots[_COUNT_NATIVE], sum(why.values()), why)

    def dispatch_plan(self, plan: Any) -> Any:
        native, codes = self._native, self.packer.native_codes()
        if native is None or codes is None or not hasattr(native, "Plan"):
            return None
        objects: list[Any] = []
        slots = []
        for slot in plan.slots:
            if slot.check == "adapted":  # a plugin's argument: its call, its key, its parts' codes
                part_codes = codes[slot.parameter:slot.parameter + slot.parts]
                if any(c == "?" for c in part_codes):
                    return None
                index = len(objects)
                version = slot.expected[2] if len(slot.expected) > 2 else None
                answer = slot.expected[3] if len(slot.expected) > 3 else None
                objects.extend([slot.expected[0], slot.expected[1], "".join(part_codes).encode(), version, answer])
                slots.append(struct.pack("<4BIiI", _DISPATCH_CHECKS["adapted"], 0, 0, 0, index, slot.parameter,
                                         slot.parts))
                continue
            code = codes[slot.parameter] if slot.parameter >= 0 else "\0"
            if code not in _DISPATCH_CODES.get(slot.check, "\0"):
                return None  # the compiled parameter is not what this kind of value packs as
            index = len(objects)
            if slot.check == "equal":
                objects.append(slot.expected)
            elif slot.check == "tensor":
                objects.extend(slot.expected)
            slots.append(struct.pack("<4BIiI", _DISPATCH_CHECKS[slot.check], ord(code), _DISPATCH_HINTS[slot.hint],
                                     _DISPATCH_RANGES[slot.range], index, slot.parameter, 0))
        base = self.packer.default_bytes(plan.defaults)
        if base is None:
            return None
        offsets = struct.pack(f"<{len(self.packer.offsets)}I", *self.packer.offsets)
        # A kernel with global scratch: the plan calls its allocation at each launch and
        # passes the address as the last, hidden parameter.
        allocation = getattr(plan.result, "scratch_allocation", None)
        scratch = (allocation, len(self.packer.offsets) - 1) if allocation is not None else ()
        return native.Plan(plan.nargs, plan.kwnames, b"".join(slots), tuple(objects), offsets, base, self.block,
                           self.shared, plan.guard, self, plan.meta_base, plan.slot_names, plan.result, self._counts,
                           *scratch)

    def function(self, device: int = 0) -> driver.Function:
        """The kernel as loaded on ``device`` (loading it there if needed): registers,
        spills and static shared memory are its attributes."""
        self.loaded(device)
        return self._functions[device]

    # -- the general path's hooks ----------------------------------------------------------

    def _pack(self, args: Sequence[Any]) -> tuple[int, bool]:
        device, torch = self.packer.pack(args)
        if torch and self._native_types != len(TORCH_TYPES):
            self._share_tensor_types()
        return device, torch

    def _share_tensor_types(self) -> None:
        """Let the native launcher read the torch tensor classes seen so far itself."""
        if self._native is not None:
            for cls in TORCH_TYPES:
                self._native.add_tensor_type(cls)
            self._native_types = len(TORCH_TYPES)
            stream_function = torch_stream_function()
            if stream_function is not None:
                self._native.set_current_stream(stream_function)

    def _current_device(self) -> int:
        return driver.current_device()

    def _load(self, device: int) -> tuple[Any, int, Any]:
        if not self._loaded:
            self._choose_native()
        module = driver.load_module(self.image, device=device, name=self.kernel_name)
        function = module.function(self.kernel_name)
        function.check_block_size(self.block)
        if self.shared:
            function.set_dynamic_shared_memory(self.shared)
        context = driver.primary_context(device)
        self._functions[device] = function
        return context, int(context), function.handle

    def _choose_native(self) -> None:
        """Take the process's native module, or wait for it if it is being built."""
        if self.cooperative:
            return  # the native module launches with cuLaunchKernel only
        self._adopt(driver.native_launcher(wait=False))
        self._awaiting_native = self._native is None and driver.native_pending()

    def _adopt(self, native: Any) -> None:
        self._native = native
        if native is not None:
            self._native_launch = native.launch

    def _take_native_when_ready(self) -> None:
        if driver.native_pending():
            return
        self._awaiting_native = False
        self._adopt(driver.native_launcher())
        if self._native is not None and self._loaded:
            self._loaded_changed()

    def _loaded_changed(self) -> None:
        if self._native is not None and self._plan is None:
            self._plan = self.packer.native_plan(self.block, self.shared)
            self._share_tensor_types()
        entries = [b"\0" * 16] * (max(self._loaded) + 1)
        for device, (_, context_id, function) in self._loaded.items():
            entries[device] = int(function).to_bytes(8, "little") + context_id.to_bytes(8, "little")
        self._table = b"".join(entries)

    def _launch(self, loaded: tuple[Any, int, Any], gx: int, gy: int, gz: int, stream: Any, device: int) -> None:
        context, context_id, function = loaded
        if self._native is not None:
            self._count_slots[_COUNT_NO_DISPATCHER + self._native.take_slow_reason()] += 1
        else:
            self._count_slots[_COUNT_PENDING if self._awaiting_native else _COUNT_NO_NATIVE] += 1
        if self._awaiting_native:
            self._take_native_when_ready()
        if self._native is not None:
            result = self._native.launch_packed(int(function), context_id, gx, gy, gz, self.block, self.shared,
                                                int(stream), self._params)
            if result:
                self._raise_native(result, device)
            return
        cuda = driver._state.bindings
        err, current = cuda.cuCtxGetCurrent()
        if err or int(current) != context_id:
            driver.check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent", self.kernel_name, device)
        if self.cooperative:
            (err,) = cuda.cuLaunchCooperativeKernel(function, gx, gy, gz, self.block, 1, 1, self.shared, stream,
                                                    self._params)
            if err:
                self._raise_cooperative(err, (gx, gy, gz), device)
            return
        (err,) = cuda.cuLaunchKernel(function, gx, gy, gz, self.block, 1, 1, self.shared, stream, self._params, 0)
        if err:
            driver.raise_error(err, "cuLaunchKernel", self.kernel_name, device)

    def _raise_cooperative(self, err: Any, grid: tuple[int, int, int], device: int) -> None:
        if int(err) == _COOPERATIVE_LAUNCH_TOO_LARGE:
            programs = grid[0] * grid[1] * grid[2]
            raise LaunchError(f"kernel '{self.kernel_name}': launch_cooperative_grid=True needs every program of the "
                              f"grid resident at once, and this GPU cannot hold {programs} programs of "
                              f"{self.block} threads and {self.shared} bytes of shared memory at once: use a smaller "
                              f"grid (at most the number of SMs times the programs one SM holds)")
        driver.raise_error(err, "cuLaunchCooperativeKernel", self.kernel_name, device)

    def _raise_native(self, result: tuple[int, int], device: int | None = None) -> None:
        code, call = result
        cuda = driver._state.bindings
        try:
            err: Any = cuda.CUresult(code)
        except (AttributeError, ValueError):
            err = code
        driver.raise_error(err, _NATIVE_CALLS.get(call, "cuLaunchKernel"), self.kernel_name, device)

    def __repr__(self) -> str:
        path = "native" if self._native is not None else "cuda-bindings"
        return (f"<polytile_nvidia.Launcher '{self.kernel_name}': {len(self.packer.names)} arguments, "
                f"{self.block} threads, {self.shared} bytes of dynamic shared memory, {path} launch>")
