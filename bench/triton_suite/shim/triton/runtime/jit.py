"""``triton.runtime.jit``: polytile's JIT names under Triton's module name."""

from polytile.runtime import JITFunction, TensorWrapper, jit, reinterpret  # noqa: F401

#: Triton's canonical dtype names (``float8e4nv``...), as its scaffolding looks them up.
type_canonicalisation_dict = {
    "bool": "int1", "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5", "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
    "uint64": "u64",
}
