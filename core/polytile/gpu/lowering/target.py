"""What a GPU backend tells the target-neutral lowering: data plus a few hooks.

NVIDIA and AMD differ here and nowhere else in the lowering: the LLVM triple and data
layout, the warp size, how a kernel is marked, how a thread reads its ids, and which
function computes ``exp`` or ``sin``.  A backend builds one :class:`GpuTarget` per
architecture and returns it from ``Backend.gpu_target(target, options)``; the passes find
it through the pass context (:func:`gpu_target_of`).

An AMD target, for instance, would set ``warp_size = 64``,
``kernel_calling_convention = "amdgpu_kernel"``, read ids with
``llvm.amdgcn.workitem.id.x`` / ``llvm.amdgcn.workgroup.id.x`` and name ``__ocml_exp_f32``
in its math table; everything else is shared.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from llvmlite import ir

from ..linear_layout import log2

#: Function attributes assign-layouts sets and the lowering reads: the program's shape.
NUM_WARPS_ATTR = "gpu.num_warps"
#: Function attribute: warps a kernel launches beyond its ``num_warps`` (0 when absent), for
#: the work a plugin's op gives them (warp specialization's producer warps).  The launch's
#: block is ``num_warps + worker_warps`` warps; the kernel's own layouts use ``num_warps``.
WORKER_WARPS_ATTR = "gpu.worker_warps"
WARP_SIZE_ATTR = "gpu.warp_size"

#: ``emit(ctx, operands, llvm_type) -> value`` for one element.
MathEmitter = Callable[[Any, list, Any], Any]

#: What an atomic hook returns for a kind or type the target has no instruction for:
#: the core then uses a compare-and-swap loop.
NO_INSTRUCTION = NotImplemented


@dataclass(frozen=True)
class GpuTarget:
    """Target data and hooks for :mod:`polytile.gpu.lowering`."""

    #: Shown in messages: "not supported by the NVIDIA backend yet".
    backend_name: str
    arch: str
    triple: str
    data_layout: str
    warp_size: int
    #: LLVM calling convention that makes a function a kernel entry point.
    kernel_calling_convention: str
    #: ``read_id(builder, kind, axis)``: kind is "thread_id", "block_id" or "num_blocks";
    #: axis 0, 1 or 2.  Returns an i32.
    read_id: Callable[[Any, str, int], Any]
    #: ``barrier(builder)``: synchronize the threads of a program.
    barrier: Callable[[Any], None]
    #: ``shuffle_xor(builder, value, lane_mask)``: the value of lane ``lane ^ lane_mask``.
    shuffle_xor: Callable[[Any, Any, int], Any]
    #: ``read_processor_id(builder)``: the i32 index of the processor the program runs on
    #: (``tile.processor_id``: NVIDIA ``%smid``).  None: the target cannot tell (an error
    #: naming the op).
    read_processor_id: Callable[[Any], Any] | None = None
    #: Nanoseconds per tick of LLVM's ``llvm.readsteadycounter`` on this target (the clock
    #: ``tile.read_clock {clock = "global"}`` reads): NVIDIA's ``%globaltimer`` counts
    #: nanoseconds, AMD's real-time counter 100 MHz.
    steady_clock_period_ns: int = 1
    #: ``shuffle_up(builder, value, delta, span)``: the value of lane ``lane - delta`` for
    #: every lane whose place in its group of ``span`` lanes (``lane % span``) is at least
    #: ``delta``; the other lanes may get any value.  ``delta`` and ``span`` are ints,
    #: ``span`` a power of two up to the warp size.  Scans use it for their steps when the
    #: lanes along the axis are the low lane bits, so a target can use a fixed move (AMD:
    #: DPP ``row_shr`` within rows of 16 lanes) instead of fetching a computed lane.
    shuffle_up: Callable[[Any, Any, int, int], Any] | None = None
    #: ``shuffle_idx(builder, value, lane)``: the value of lane ``lane`` (an i32 LLVM value).
    shuffle_idx: Callable[[Any, Any, Any], Any] | None = None
    #: ``warp_uniform(builder, value)``: the i32 ``value``, which is the same in every lane
    #: of a warp, marked as such for the vendor's compiler (NVIDIA: a shuffle from lane 0,
    #: so that ptxas keeps what is derived from it in uniform registers, as wgmma's
    #: descriptors must be; AMD: ``readfirstlane``, into a scalar register).  The warp
    #: index goes through it.  None: the value as it is.
    warp_uniform: Callable[[Any, Any], Any] | None = None
    #: Math functions by name ("exp", "sin", ...; see ``elementwise.MATH_FUNCTIONS``):
    #: the target's own emitters, consulted before the LLVM intrinsics the core knows.
    math: Mapping[str, MathEmitter] = field(default_factory=dict)
    #: ``annotate_kernel(function, num_threads)``: attributes such as the block size.
    annotate_kernel: Callable[[Any, int], None] = lambda function, num_threads: None
    #: ``by_value_parameter(function, index)``: mark kernel parameter ``index`` (a
    #: ``byval`` pointer to the bytes of a type with ``by_value``, see
    #: :class:`~polytile.ir.types.DialectType`) as read-only parameter memory whose
    #: address the kernel may take (NVIDIA: ``__grid_constant__``).  None: the target
    #: takes no such parameters.
    by_value_parameter: Callable[[Any, int], None] | None = None
    #: Shared memory (LDS) one program may use, bytes; None: unchecked.
    max_shared_bytes: int | None = None
    global_address_space: int = 1
    shared_address_space: int = 3
    #: Widest access one thread makes in one instruction.
    max_vector_bits: int = 128
    #: Why this target cannot compile inline assembly (``pl.inline_asm_elementwise``),
    #: in words; "" when it can.
    inline_asm_refusal: str = ""
    #: Prefix of the functions of the vendor's math library (``__nv_``, ``__ocml_``): calls
    #: to them stay declarations until the backend links the library.
    math_library_prefix: str = ""
    #: Compiled with ``debug=True``: ``device_assert`` is checked (as in Triton, it is
    #: compiled out otherwise).  :func:`gpu_target_of` sets it from the options.
    debug: bool = False
    #: ``float8_convert(builder, value, source, result)``: convert one element between
    #: "f32" / "f16" and "f8e4m3" / "f8e5m2" (8-bit floats are i8 bits) with the target's
    #: instruction, or return None to let the core convert with integer code.  Only
    #: f32 -> fp8 and fp8 -> f16 are asked for.
    float8_convert: Callable[[Any, Any, str, str], Any] | None = None
    #: ``atomic_rmw(builder, kind, ptr, value, mask, sem, scope, returns)``: one atomic
    #: read-modify-write of ``kind`` (``tile.atomic_rmw`` kinds; "max"/"min" signed,
    #: "umax"/"umin" unsigned, never on floats), done only where the i1 ``mask`` (None:
    #: always) holds; returns the old value (0 where masked off) when ``returns``, else
    #: anything.  :data:`NO_INSTRUCTION` for a kind or type it has no instruction for.
    #: None: LLVM ``atomicrmw`` (system scope).
    atomic_rmw: Callable[..., Any] | None = None
    #: ``atomic_cas(builder, ptr, compare, value, mask, sem, scope)`` -> the old value,
    #: for 16-, 32- and 64-bit integers.  None: LLVM ``cmpxchg`` (system scope).
    atomic_cas: Callable[..., Any] | None = None
    #: ``printf(builder, format, arguments)``: print from one thread, C ``printf``
    #: style; arguments are already promoted (i32, i64, double, pointers).  None: the
    #: target cannot print (``device_print`` is an error naming the kernel).
    printf: Callable[[Any, str, list], None] | None = None
    #: ``assert_fail(builder, message, file, line, function)``: report a failed
    #: assertion and stop the kernel.  None: ``device_assert`` is an error (with debug=True).
    assert_fail: Callable[[Any, str, str, int, str], None] | None = None
    #: ``memory_access(builder, kind, ptr, vector, mask, values, qualifiers)``: a load
    #: ("load": returns the loaded elements, 0 where masked off) or store ("store":
    #: ``values``) of one vector (an ``ir.VectorType``) with cache/eviction/volatile
    #: qualifiers (:class:`polytile.gpu.lowering.memory.Qualifiers`).  None: LLVM
    #: loads and stores, with the cache hints left out and volatile refused.
    memory_access: Callable[..., Any] | None = None
    #: ``named_barrier(builder, index, threads, arrive=False)``: synchronize ``threads``
    #: threads (whole warps) of the program on hardware barrier ``index`` (an int or an i32
    #: value; NVIDIA ``bar.sync index, threads``), the barrier of one group of warps where a
    #: kernel's warps do different work (a warp-specialization plugin's op); ``arrive``:
    #: count this thread's arrival and go on without waiting (``bar.arrive``).  None: only
    #: the whole program's barrier.
    named_barrier: Callable[..., None] | None = None
    #: ``set_max_registers(builder, count, increase)``: make ``count`` the registers of
    #: each thread of the executing warp group (all of its warps execute it), growing them
    #: (``increase``) from the program's pool or giving them back to it (NVIDIA sm_90a
    #: ``setmaxnreg.inc`` / ``.dec``).  None: the target cannot move registers.
    set_max_registers: Callable[[Any, int, bool], None] | None = None
    #: Registers one program may hold in all, across its threads (NVIDIA: the 65536 of a
    #: multiprocessor's file); None: unknown.
    registers_per_program: int | None = None
    #: Backend options its matrix unit reads (AMD: ``{"nonkdim": 16}``), passed to
    #: ``MatrixUnit.select`` as keywords; empty: none are passed.
    matrix_options: Mapping[str, Any] = field(default_factory=dict)


def warp_index(target: GpuTarget, builder: Any, thread_id: Any) -> Any:
    """The i32 index of the warp of ``thread_id`` in its program, through the target's
    :attr:`GpuTarget.warp_uniform`."""
    warp = builder.lshr(thread_id, ir.Constant(ir.IntType(32), log2(target.warp_size)))
    return target.warp_uniform(builder, warp) if target.warp_uniform is not None else warp


def gpu_target_of(context: Any) -> GpuTarget:
    """The :class:`GpuTarget` of the pass context's target (asks its backend)."""
    from ...errors import ConfigError

    target = getattr(context, "target", None)
    if target is None:
        raise ConfigError("the GPU passes need a target (nvidia:sm_90a, ...); the pass context has none")
    if isinstance(target, GpuTarget):
        return target
    from ...plugins.manager import get_plugin_manager

    backend, resolved = get_plugin_manager().backends.resolve(target)
    make = getattr(backend, "gpu_target", None)
    if make is None:
        raise ConfigError(f"backend '{backend.name}' (target '{resolved}') does not compile through the GPU "
                          "lowering: it has no gpu_target()")
    options = getattr(context, "options", None)
    gpu_target = make(resolved, options)
    if getattr(options, "debug", False) and not gpu_target.debug:
        gpu_target = dataclasses.replace(gpu_target, debug=True)
    return gpu_target


def num_warps_of(context: Any, default: int = 4) -> int:
    """The ``num_warps`` option of the compilation (4 when the context has no options)."""
    return int(getattr(getattr(context, "options", None), "num_warps", default) or default)
