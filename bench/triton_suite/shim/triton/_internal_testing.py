"""``triton._internal_testing``: the helpers Triton's test files import, written for
polytile (the same names and meanings; test scaffolding, not language)."""

from __future__ import annotations

import re
from typing import Optional

import numpy as np
import pytest
import torch
from numpy.random import RandomState

import triton
import triton.language as tl
from triton.runtime.jit import TensorWrapper, reinterpret

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})


def _target():
    from polytile.plugins.manager import get_plugin_manager

    return get_plugin_manager().choose_target(None).target


def is_interpreter() -> bool:
    return _target().backend == "interp"


def get_current_target():
    return None if is_interpreter() else triton.runtime.driver.active.get_current_target()


def is_cuda() -> bool:
    target = get_current_target()
    return target is not None and target.backend == "cuda"


def _capability() -> int:
    return torch.cuda.get_device_capability()[0] if is_cuda() else 0


def is_ampere_or_newer() -> bool:
    return _capability() >= 8


def is_hopper_or_newer() -> bool:
    return _capability() >= 9


def is_hopper() -> bool:
    return _capability() == 9


def is_blackwell() -> bool:
    return _capability() == 10


def is_sm12x() -> bool:
    return _capability() == 12


def is_hip() -> bool:
    target = get_current_target()
    return target is not None and target.backend == "hip"


def is_hip_cdna2() -> bool:
    return is_hip() and get_arch() == "gfx90a"


def is_hip_cdna3() -> bool:
    return is_hip() and get_arch() == "gfx942"


def is_hip_cdna4() -> bool:
    return is_hip() and get_arch() == "gfx950"


def is_hip_cdna() -> bool:
    return is_hip_cdna2() or is_hip_cdna3() or is_hip_cdna4()


def is_hip_gfx11() -> bool:
    return is_hip() and get_arch().startswith("gfx11")


def is_hip_gfx12() -> bool:
    return is_hip() and get_arch().startswith("gfx12")


def is_hip_gfx1250() -> bool:
    return is_hip() and get_arch() == "gfx1250"


def is_xpu() -> bool:
    return False


def get_arch() -> str:
    target = get_current_target()
    return "" if target is None else str(target.arch)


def numpy_random(shape, dtype_str, rs: Optional[RandomState] = None, low=None, high=None):
    """Random values of ``dtype_str`` (never 0 for integers: division tests need that)."""
    if isinstance(shape, int):
        shape = (shape,)
    if rs is None:
        rs = RandomState(seed=17)
    if dtype_str in int_dtypes + uint_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        low = info.min if low is None else max(low, info.min)
        high = info.max if high is None else min(high, info.max)
        values = rs.randint(low, high, shape, dtype=getattr(np, dtype_str))
        values[values == 0] = 1
        return values
    if dtype_str and "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":
        return (rs.normal(0, 1, shape).astype("float32").view("uint32") & np.uint32(0xFFFF0000)).view("float32")
    if dtype_str in ("bool", "int1", "bool_"):
        return rs.normal(0, 1, shape) > 0.0
    raise RuntimeError(f"Unknown dtype {dtype_str}")


def to_triton(x: np.ndarray, device, dst_type=None):
    """``x`` as a torch tensor on ``device``; unsigned and fp8 data as a polytile
    TensorWrapper of a signed/int8 tensor (torch has no such dtypes)."""
    name = x.dtype.name
    if name in uint_dtypes:
        return reinterpret(torch.tensor(x.astype(getattr(np, name[1:])), device=device), getattr(tl, name))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), getattr(tl, dst_type))
    if name == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


_TRITON_NAMES = {"bool": "int1", "float8_e4m3fn": "float8e4nv", "float8_e5m2": "float8e5"}


def str_to_triton_dtype(x: str):
    return getattr(tl, _TRITON_NAMES.get(x, x))


def torch_dtype_name(dtype) -> str:
    if isinstance(dtype, tl.dtype):
        return dtype.name
    if isinstance(dtype, torch.dtype):
        return re.match(r"^torch\.(\w+)$", str(dtype)).group(1)
    raise TypeError(f"not a triton or torch dtype: {type(dtype)}")


def to_numpy(x):
    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        if x.dtype is torch.bfloat16:
            return x.cpu().float().numpy()
        return x.cpu().numpy()
    raise ValueError(f"Not a triton-compatible tensor: {x}")


def supports_tma(byval_only: bool = False) -> bool:
    try:
        import polytile_tma  # noqa: F401
    except ImportError:
        return False
    return is_interpreter() or is_hopper_or_newer()


def supports_ws() -> bool:
    return is_hopper()


def tma_skip_msg(byval_only: bool = False) -> str:
    return "polytile-tma is not installed, or the target has no TMA"


requires_tma = pytest.mark.skipif(not supports_tma(), reason=tma_skip_msg())


def default_alloc_fn(size: int, align: int, _):
    return torch.empty(size, dtype=torch.int8, device="cpu" if is_interpreter() else "cuda")


def unwrap_tensor(t):
    return t.base if isinstance(t, TensorWrapper) else t


def _fresh_knobs_impl(skipped_attr=None):
    from triton import knobs

    return (lambda: knobs), (lambda: None)
