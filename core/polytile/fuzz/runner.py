"""Running one generated kernel: on the interpreter, on a GPU target, or compiled for
several archs, and comparing the outputs.

Every kernel is written to a file and imported (``@pt.jit`` reads its source, so the
frontend sees exactly what a user's kernel would give it).  Inputs come from a NumPy
generator seeded by the kernel's seed and index: a rerun sees the same numbers.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import lowp
from .dtypes import BY_TAG
from .program import Array, Kernel, array_shape

#: Outcomes of one kernel.
OK, MISMATCH, CRASH = "ok", "mismatch", "crash"


@dataclass
class Outcome:
    status: str
    detail: str = ""
    where: str = ""  # "interp", "nvidia", "compile:<arch>", "compare"
    labels: list[str] = field(default_factory=list)


def load_kernel(kernel: Kernel, directory: Path) -> Any:
    """Write ``kernel``'s module under ``directory`` and import it; the JIT function."""
    path = directory / f"{kernel.name}.py"
    path.write_text(kernel.source())
    module_name = f"polytile_fuzz_kernels.{kernel.name}_{abs(hash(path.read_text())) % 10 ** 12}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return getattr(module, kernel.name)


# --------------------------------------------------------------------------------------
# Inputs


def make_inputs(kernel: Kernel) -> dict[str, np.ndarray]:
    """Every array argument, as the interpreter takes it (bf16/fp8 as their bits)."""
    rng = np.random.default_rng([kernel.seed, kernel.index])
    arrays = {}
    for array in kernel.arrays:
        shape = array_shape(kernel, array)
        if array.role == "out":
            arrays[array.name] = np.zeros(shape, _storage(array.dtype))
        else:
            arrays[array.name] = _random(rng, array.dtype, shape)
    return arrays


def _storage(tag: str) -> np.dtype:
    return np.dtype(lowp.BY_TAG[tag].storage if tag in lowp.BY_TAG else BY_TAG[tag].numpy)


def _random(rng: np.random.Generator, tag: str, shape: tuple[int, ...]) -> np.ndarray:
    if tag == "bf16":
        values = rng.uniform(-2, 2, shape).astype(np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact in bf16
    if tag in ("e4m3", "e5m2"):
        # Random bit patterns of magnitude below 4, no NaN or infinity.
        exponent_bits, bias = (4, 7) if tag == "e4m3" else (5, 15)
        mantissa_bits = 7 - exponent_bits
        exponent = rng.integers(0, bias + 2, shape)
        mantissa = rng.integers(0, 1 << mantissa_bits, shape)
        sign = rng.integers(0, 2, shape)
        return ((sign << 7) | (exponent << mantissa_bits) | mantissa).astype(np.uint8)
    dtype = BY_TAG[tag]
    if dtype.is_float:
        return rng.uniform(-2, 2, shape).astype(dtype.numpy)
    low = -9 if dtype.kind == "i" else 0
    return rng.integers(low, 10, shape).astype(dtype.numpy)


def as_float(tag: str, values: np.ndarray) -> np.ndarray:
    """Output values as numbers (bf16/fp8 bits decoded)."""
    if tag == "bf16":
        return (values.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if tag == "e5m2":
        return (values.astype(np.uint16) << 8).view(np.float16).astype(np.float64)
    return values


def launch_arguments(kernel: Kernel, arrays: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    args = [arrays[a.name] for a in kernel.arrays] + [kernel.sizes[name] for name in kernel.scalar_parameters()]
    return args, dict(kernel.blocks)


# --------------------------------------------------------------------------------------
# Running


def run_interp(fn: Any, kernel: Kernel) -> dict[str, np.ndarray]:
    arrays = make_inputs(kernel)
    args, meta = launch_arguments(kernel, arrays)
    fn[(kernel.programs,)](*args, EMULATE=True, num_warps=kernel.num_warps, target="interp", **meta)
    return {a.name: arrays[a.name] for a in kernel.arrays if a.role == "out"}


def run_torch(fn: Any, kernel: Kernel, target: str) -> dict[str, np.ndarray]:
    import torch

    arrays = make_inputs(kernel)
    tensors = {}
    for array in kernel.arrays:
        values = arrays[array.name]
        if array.dtype in lowp.BY_TAG:
            fmt = lowp.BY_TAG[array.dtype]
            signed = values.view(np.int16 if values.dtype == np.uint16 else np.uint8)
            tensors[array.name] = torch.from_numpy(signed.copy()).cuda().view(getattr(torch, fmt.torch))
        else:
            tensors[array.name] = torch.from_numpy(values.copy()).cuda()
    args, meta = launch_arguments(kernel, tensors)
    fn[(kernel.programs,)](*args, EMULATE=False, num_warps=kernel.num_warps, target=target, **meta)
    torch.cuda.synchronize()
    results = {}
    for array in kernel.arrays:
        if array.role != "out":
            continue
        tensor = tensors[array.name].cpu()
        if array.dtype in lowp.BY_TAG:
            tensor = tensor.view(torch.int16 if array.dtype == "bf16" else torch.uint8)
            results[array.name] = tensor.numpy().view(_storage(array.dtype))
        else:
            results[array.name] = tensor.numpy()
    return results


def argument_types(kernel: Kernel) -> dict[str, Any]:
    """The IR type of each run-time parameter (for compiling without arrays)."""
    from ..ir import types as t

    def element(tag: str) -> Any:
        if tag in lowp.BY_TAG:
            return t.FloatType({"bf16": "bf16", "e4m3": "f8e4m3", "e5m2": "f8e5m2"}[tag])
        dtype = BY_TAG[tag]
        return t.FloatType(dtype.tag) if dtype.is_float else t.IntType(dtype.bits, dtype.kind == "i")

    types = {f"{a.name}_ptr": t.PointerType(element(a.dtype)) for a in kernel.arrays}
    types.update({name: t.IntType(32) for name in kernel.scalar_parameters()})
    return types


def compile_for(fn: Any, kernel: Kernel, archs: list[str]) -> dict[str, Any]:
    """Compile the GPU form (``EMULATE=False``) for each arch: the result or the error."""
    from ..frontend.codegen import generate_kernel
    from ..ir_testing import compile_for_targets

    module, _ = generate_kernel(fn, argument_types(kernel), {"EMULATE": False, **kernel.blocks})
    return compile_for_targets(module, archs, label=kernel.name, num_warps=kernel.num_warps)


def check_artifact(result: Any, arch: str) -> str:
    """What is missing from a compiled artifact, or ""."""
    artifacts = getattr(result, "artifacts", {}) or {}
    backend = arch.partition(":")[0]
    wanted = {"nvidia": ("ptx", "cubin"), "amd": ("hsaco",)}.get(backend, ())
    missing = [w for w in wanted if not artifacts.get(w)]
    if "cubin" in wanted and artifacts.get("cubin", b"")[:4] != b"\x7fELF":
        missing.append("a cubin ELF")
    if "hsaco" in wanted and artifacts.get("hsaco", b"")[:4] != b"\x7fELF":
        missing.append("a HSACO ELF")
    return ", ".join(missing)


# --------------------------------------------------------------------------------------
# Comparing


def compare(kernel: Kernel, expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> str:
    """"" when every output agrees within its tolerance; else what differs."""
    problems = []
    for array in kernel.arrays:
        if array.role != "out":
            continue
        problem = compare_array(array, expected[array.name], got[array.name])
        if problem:
            problems.append(f"{array.name} ({array.dtype}, {array.shape}): {problem}")
    return "; ".join(problems)


def compare_array(array: Array, expected: np.ndarray, got: np.ndarray) -> str:
    if expected.shape != got.shape:
        return f"shape {got.shape} != {expected.shape}"
    ref = as_float(array.dtype, expected)
    out = as_float(array.dtype, got)
    if array.dtype in BY_TAG and not BY_TAG[array.dtype].is_float or array.error == 0:
        if array.dtype in BY_TAG and BY_TAG[array.dtype].is_float:
            same = (ref == out) | (np.isnan(ref.astype(np.float64)) & np.isnan(out.astype(np.float64)))
        else:
            same = ref == out
    else:
        r64, o64 = ref.astype(np.float64), out.astype(np.float64)
        # The bound tracked by the generator, and one unit in the last place of the
        # stored type (the final rounding may fall either way).
        eps = BY_TAG[array.dtype].eps if array.dtype in BY_TAG else 2.0 ** -(
            lowp.BY_TAG[array.dtype].mantissa_bits + 1)
        tolerance = 2 * array.error + 2 * eps * np.abs(r64)
        same = (np.abs(r64 - o64) <= tolerance) | (np.isnan(r64) & np.isnan(o64))
    if np.all(same):
        return ""
    bad = np.argwhere(~np.asarray(same))
    first = tuple(int(i) for i in bad[0])
    return (f"{len(bad)} of {same.size} elements differ; first at {first}: interp {expected[first]!r}, "
            f"gpu {got[first]!r} (allowed error {array.error:.3g})")


# --------------------------------------------------------------------------------------
# One kernel, end to end


def check(kernel: Kernel, directory: Path, target: str | None, archs: list[str]) -> Outcome:
    """Run ``kernel`` on the interpreter and ``target`` (or compile it for ``archs``)."""
    try:
        fn = load_kernel(kernel, directory)
    except Exception:
        return Outcome(CRASH, _short_traceback(), "import", kernel.labels)
    return check_function(fn, kernel, target, archs)


def check_function(fn: Any, kernel: Kernel, target: str | None, archs: list[str]) -> Outcome:
    """:func:`check` for a kernel already imported (a saved regression test's)."""
    labels = kernel.labels
    if archs:
        try:
            results = compile_for(fn, kernel, archs)
        except Exception:
            return Outcome(CRASH, _short_traceback(), "frontend", labels)
        for arch, result in results.items():
            if isinstance(result, BaseException):
                if _missing_tool(result, arch):
                    continue
                return Outcome(CRASH, f"{type(result).__name__}: {result}", f"compile:{arch}", labels)
            missing = check_artifact(result, arch)
            if missing:
                return Outcome(CRASH, f"no {missing} in the result", f"compile:{arch}", labels)
    try:
        expected = run_interp(fn, kernel)
    except Exception:
        return Outcome(CRASH, _short_traceback(), "interp", labels)
    if target is None or target == "interp":
        return Outcome(OK, labels=labels)
    try:
        got = run_torch(fn, kernel, target)
    except Exception:
        return Outcome(CRASH, _short_traceback(), target, labels)
    problem = compare(kernel, expected, got)
    return Outcome(MISMATCH, problem, "compare", labels) if problem else Outcome(OK, labels=labels)


def _missing_tool(error: BaseException, arch: str) -> bool:
    """ld.lld or the ROCm device libraries absent on this machine: the AMD backend says so
    clearly, and the kernel cannot be linked here (not a compiler bug)."""
    name = type(error).__name__
    return arch.startswith("amd:") and name in ("ToolNotFoundError", "DeviceLibsMissingError")


def _short_traceback(limit: int = 6) -> str:
    text = traceback.format_exc(limit=-limit)
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-12:])
