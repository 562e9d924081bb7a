"""Ahead-of-time compilation: a ``@jit`` kernel, a signature and constexpr values in;
the IR of every stage, the backend's artifacts (LLVM IR, PTX, cubin, AMDGCN, HSACO) and a
JSON of metadata out.  No device is needed: only the compiler runs.

    result = compile_kernel("examples/vector_add.py:add_kernel", target="nvidia:sm_90a",
                            signature="*fp32:16,*fp32:16,*fp32:16,i32", constexprs={"BLOCK_SIZE": 1024})
    result.emit("ptx")                # one stage or artifact
    result.write("build/")            # every file, as `polytile compile -o build/` writes them

The signature gives the type of each run-time parameter, in order (constexpr parameters
get values instead): ``*dtype`` for a pointer, a dtype name for a scalar, ``:16`` for a
value (an address, for a pointer) divisible by 16 and ``:1`` for an integer equal to 1:
the specializations the JIT makes by itself from the values it sees.  docs/aot.md has the
whole syntax.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .backend import GLOBAL_SCRATCH_BYTES, GLOBAL_SCRATCH_PARAMETER, ArgumentSlot, LaunchParam, natural_argument_layout
from .errors import AotError, PolytileError, did_you_mean
from .ir import types as t

__all__ = ["AotError", "AotResult", "ArgumentSlot", "SignatureEntry", "argument_layout", "compile_kernel",
           "load_kernel", "parse_assignments", "parse_constexpr_value", "parse_signature"]


# -- signatures ---------------------------------------------------------------------------


def _dtype_names() -> dict[str, t.Type]:
    """Every spelling of every language dtype: Triton's (``fp32``, ``i32``), the
    language's (``float32``, ``int32``) and the IR's (``f32``, ``f8e4m3``)."""
    from .language import core as lc

    names: dict[str, t.Type] = {}
    for attribute, value in vars(lc).items():
        if isinstance(value, lc.dtype) and not isinstance(value, (lc.pointer_type, lc.unsupported_dtype)):
            names[attribute] = value.ir
            names[value.name] = value.ir
            names[value.ir.spelling] = value.ir
    return names


def _canonical(type_: t.Type) -> str:
    """The signature spelling of a scalar type: Triton's (``i32``, ``u8``, ``fp32``, ``fp8e4nv``)."""
    from .language import core as lc

    if isinstance(type_, t.IntType):
        return type_.spelling
    return lc.dtype_of(type_).name


_ENTRY = re.compile(r"^(?P<stars>\**)(?P<dtype>[A-Za-z_][A-Za-z0-9_]*)(?::(?P<hint>.*))?$")


@dataclass(frozen=True)
class SignatureEntry:
    """One run-time parameter of a signature: its IR type and specialization."""

    type: t.Type
    #: 16 when the value (an address, for a pointer) is known divisible by 16, else 1.
    divisibility: int = 1
    #: The integer is known to be 1.
    equal_to_1: bool = False

    @property
    def hint(self) -> str:
        """The JIT's spelling of the specialization: ``"D"``, ``"1"`` or ``""``."""
        return "D" if self.divisibility == 16 else "1" if self.equal_to_1 else ""

    def __str__(self) -> str:
        if isinstance(self.type, t.PointerType):
            text = "*" + _canonical(self.type.pointee)
        else:
            text = _canonical(self.type)
        return text + (":16" if self.divisibility == 16 else ":1" if self.equal_to_1 else "")


def parse_signature(signature: str | Sequence[str]) -> list[SignatureEntry]:
    """The entries of ``"*fp32:16,*fp32,i32"`` (or of a list of entry strings)."""
    items = [item.strip() for item in signature.split(",")] if isinstance(signature, str) else list(signature)
    if isinstance(signature, str) and not signature.strip():
        return []
    names = _dtype_names()
    return [_parse_entry(item, position, names) for position, item in enumerate(items, 1)]


def _parse_entry(item: Any, position: int, names: Mapping[str, t.Type]) -> SignatureEntry:
    def error(reason: str) -> AotError:
        return AotError(f"signature entry {position} ({item!r}): {reason}")

    if not isinstance(item, str):
        raise error("not a string; write entries such as '*fp32', 'i32:16'")
    if not item:
        raise error("empty; each run-time parameter needs a type, such as '*fp32' or 'i32'")
    match = _ENTRY.match(item)
    if match is None:
        raise error("not a type; write '*DTYPE' for a pointer or 'DTYPE' for a scalar, optionally followed by "
                    "':16' or ':1', such as '*fp16:16' or 'i32'")
    stars, dtype, hint = match["stars"], match["dtype"], match["hint"]
    scalar = names.get(dtype)
    if scalar is None:
        raise error(f"unknown dtype '{dtype}'{did_you_mean(dtype, names)}")
    if len(stars) > 1:
        raise error("pointers to pointers are not supported; a kernel takes '*DTYPE' pointers to its data")
    type_: t.Type = t.PointerType(scalar) if stars else scalar
    if hint is None:
        return SignatureEntry(type_)
    is_int = isinstance(type_, t.IntType) and type_.width > 1
    if hint == "16" and (stars or is_int):
        return SignatureEntry(type_, divisibility=16)
    if hint == "1" and is_int:
        return SignatureEntry(type_, equal_to_1=True)
    if not (stars or is_int):
        raise error(f"':{hint}' specializes integers and pointers only, not {dtype}")
    if not hint:
        raise error("nothing follows ':'; write ':16' (divisible by 16)" + (" or ':1' (equal to 1)" if is_int else "")
                    + ", or no ':' at all")
    if hint == "1":
        raise error("':1' (equal to 1) is for integers; a pointer takes ':16' (address divisible by 16)")
    raise error(f"':{hint}' is not a specialization; use ':16' (divisible by 16)"
                + (" or ':1' (equal to 1)" if is_int else ""))


# -- constexprs ----------------------------------------------------------------------------


def parse_constexpr_value(text: str) -> Any:
    """A constexpr value written on a command line: ``True``/``False``, ``None``, an
    integer (``1024``, ``0x400``), a float (``1e-5``), a dtype (``pl.float16``), loop
    options (``pl.WarpSpecialize(producer_registers=24)``, literal keyword values), a
    quoted string, or else the text itself as a string."""
    from .language import core as lc

    word = text.strip()
    if word.startswith(("pl.WarpSpecialize(", "tl.WarpSpecialize(", "WarpSpecialize(")):
        return _warp_specialize(word)
    if word in ("True", "true"):
        return True
    if word in ("False", "false"):
        return False
    if word == "None":
        return None
    try:
        return int(word, 0)
    except ValueError:
        pass
    try:
        return float(word)
    except ValueError:
        pass
    if word.startswith("pl."):
        value = getattr(lc, word[3:], None)
        if isinstance(value, lc.dtype):
            return value
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        return word[1:-1]
    return text


def _warp_specialize(word: str) -> Any:
    """``pl.WarpSpecialize(k=v, ...)`` written on a command line, its values literals."""
    import ast

    from .language.loop_options import LoopOptionError, WarpSpecialize

    try:
        call = ast.parse(word, mode="eval").body
        if not isinstance(call, ast.Call) or call.args:
            raise ValueError("only keyword arguments")
        options = {keyword.arg: ast.literal_eval(keyword.value) for keyword in call.keywords}
    except (SyntaxError, ValueError) as exc:
        raise AotError(f"{word!r}: write pl.WarpSpecialize(name=literal, ...), such as "
                       f"pl.WarpSpecialize(producer_registers=24) ({exc})") from None
    try:
        return WarpSpecialize(**options)
    except (TypeError, LoopOptionError) as exc:
        raise AotError(f"{word!r}: {exc}") from None


def parse_assignments(items: Sequence[str], what: str) -> dict[str, Any]:
    """``["BLOCK=1024", "ACT='relu'"]`` as ``{"BLOCK": 1024, "ACT": "relu"}``;
    ``what`` names the flag in errors (``--constexpr``)."""
    values: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise AotError(f"{what} {item!r}: write NAME=VALUE, such as {what} BLOCK=1024")
        if name in values:
            raise AotError(f"{what} {name} is given twice ({name}={values[name]!r} and {item!r})")
        values[name] = parse_constexpr_value(value)
    return values


# -- loading a kernel from a file -------------------------------------------------------------


def load_kernel(spec: str | os.PathLike) -> Any:
    """The ``@jit`` function named by ``"path/to/file.py:kernel"`` (the file is imported
    as ``python file.py`` would run it, except that ``__name__`` is not ``"__main__"``)."""
    text = os.fspath(spec)
    path_text, sep, name = text.rpartition(":")
    if not sep or not path_text or not name.isidentifier():
        raise AotError(f"{text!r} does not name a kernel: write FILE.py:KERNEL, such as "
                       "examples/vector_add.py:add_kernel")
    path = Path(path_text)
    if not path.is_file():
        reason = "it is a directory" if path.is_dir() else "no such file"
        raise AotError(f"cannot read kernel file '{path_text}': {reason}")
    module = _import_file(path)
    kernels = sorted(n for n, v in vars(module).items() if getattr(v, "__polytile_jit__", False))
    listed = f" (its @jit functions: {', '.join(kernels)})" if kernels else " (it defines no @jit function)"
    if not hasattr(module, name):
        raise AotError(f"'{path_text}' has no kernel '{name}'{did_you_mean(name, kernels)}{listed}")
    found = getattr(module, name)
    # @autotune and @heuristics wrap the @jit function: AOT takes its configuration from
    # the command line, so the function inside is what it compiles.
    while not getattr(found, "__polytile_jit__", False) and getattr(found, "fn", None) is not None:
        found = found.fn
    if not getattr(found, "__polytile_jit__", False):
        raise AotError(f"'{name}' in '{path_text}' is a {type(found).__name__}, not a @jit kernel{listed}")
    return found


def _import_file(path: Path) -> Any:
    import importlib.util
    import traceback

    resolved = path.resolve()
    module_name = "_polytile_aot_" + re.sub(r"\W", "_", resolved.stem)
    spec = importlib.util.spec_from_file_location(module_name, resolved)
    if spec is None or spec.loader is None:
        raise AotError(f"cannot import '{path}': it is not a Python file")
    module = importlib.util.module_from_spec(spec)
    # As `python FILE.py` does: modules next to the file are importable from it.
    sys.path.insert(0, str(resolved.parent))
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except PolytileError:
        sys.modules.pop(module_name, None)
        raise
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        where = f"{path}:{exc.lineno}: " if exc.lineno else f"{path}: "
        shown = f"\n    {exc.text.rstrip()}" if exc.text else ""
        raise AotError(f"{where}error: invalid Python: {exc.msg}{shown}") from None
    except (Exception, SystemExit) as exc:
        sys.modules.pop(module_name, None)
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == resolved]
        where = f" at line {frames[-1].lineno} ({frames[-1].line})" if frames else ""
        raise AotError(f"importing '{path}' failed{where}: {type(exc).__name__}: {exc}") from None
    finally:
        if sys.path and sys.path[0] == str(resolved.parent):
            del sys.path[0]
    return module


# -- argument layout -----------------------------------------------------------------------------


def argument_layout(types: Sequence[t.Type]) -> tuple[list[ArgumentSlot], int]:
    """Each parameter at its natural alignment (at most 8), pointers 8 bytes, ``i1`` one
    byte, as CUDA's and HIP's launch calls pack them (:func:`polytile.backend.natural_argument_layout`;
    compiles ask their backend, :meth:`~polytile.backend.Backend.argument_layout`)."""
    try:
        slots, total = natural_argument_layout(types)
    except ValueError as exc:
        raise AotError(str(exc)) from None
    return list(slots), total


# -- compiling ----------------------------------------------------------------------------------


@dataclass
class AotResult:
    """What an ahead-of-time compile made.

    ``stages``: the IR before the pipeline (``"frontend"``) and after each stage;
    ``artifacts``: the file artifacts (``{"llvm_ir": str, "ptx": str, "cubin": bytes}``);
    ``metadata``: the JSON-able description written as ``<kernel>.json``;
    ``files``: the paths :meth:`write` wrote (``compile_kernel(output_dir=...)`` writes).
    """

    kernel: str
    target: Any
    stages: list[Any]
    artifacts: dict[str, str | bytes]
    metadata: dict[str, Any]
    result: Any = field(repr=False)
    files: list[Path] = field(default_factory=list)

    def stage_file(self, index: int) -> str:
        return f"{self.kernel}.{index:02d}-{self.stages[index].name}.ir"

    def stage_text(self, index: int) -> str:
        """The IR after stage ``index``, headed by a comment saying what it is (the IR
        parser skips it, so ``polytile opt`` reads the file)."""
        stage = self.stages[index]
        what = "before the pipeline" if index == 0 else f"after stage '{stage.name}'"
        return f"// {self.kernel} for {self.target}: IR {what}\n{stage.ir}"

    def artifact_files(self) -> dict[str, str]:
        """The file name of each artifact: ``<kernel>.<ext>``, or ``<kernel>.<key>.<ext>``
        for a key the extension table does not know (or a clash)."""
        from .passes.instrumentation import ARTIFACT_EXTENSIONS, artifact_extension

        names: dict[str, str] = {}
        for key, value in self.artifacts.items():
            extension = artifact_extension(key, value)
            name = f"{self.kernel}.{extension}"
            if key not in ARTIFACT_EXTENSIONS or name in names.values():
                name = f"{self.kernel}.{key}.{extension}"
            names[key] = name
        return names

    def outputs(self) -> dict[str, str | bytes]:
        """Every file, by name, in order: stage IR, artifacts, then ``<kernel>.json``."""
        files: dict[str, str | bytes] = {self.stage_file(i): self.stage_text(i) for i in range(len(self.stages))}
        for key, name in self.artifact_files().items():
            files[name] = self.artifacts[key]
        files[f"{self.kernel}.json"] = self.metadata_json()
        return files

    def metadata_json(self) -> str:
        return json.dumps(self.metadata, indent=2) + "\n"

    def emit_names(self) -> list[str]:
        """What :meth:`emit` takes, as shown to a user: each stage (numbered where an
        artifact's name hides it), each artifact (with its extension), ``json``."""
        from .passes.instrumentation import artifact_extension

        hidden = set(self.artifacts) | {"llvm", "llvm-ir"}
        names = [f"{i:02d}-{stage.name}" if stage.name in hidden else stage.name
                 for i, stage in enumerate(self.stages)]
        for key, value in self.artifacts.items():
            extension = artifact_extension(key, value)
            names.append(key if extension == key else f"{key} ({extension})")
        return names + ["json"]

    def emit(self, name: str) -> str | bytes:
        """One stage's IR (``"tile"``, or numbered as its file, ``"01-tile"``), one
        artifact (by key, ``"llvm_ir"``, or extension, ``"ll"``; ``"llvm"`` is the LLVM
        IR too) or the metadata (``"json"``).  Artifacts win over stages of the same name."""
        from .passes.instrumentation import artifact_extension

        if name in ("json", "metadata"):
            return self.metadata_json()
        wanted = "llvm_ir" if name in ("llvm", "llvm-ir") else name
        for key, value in self.artifacts.items():
            if wanted in (key, artifact_extension(key, value)):
                return value
        for index, stage in enumerate(self.stages):
            if name in (stage.name, f"{index:02d}-{stage.name}"):
                return self.stage_text(index)
        choices = self.emit_names()
        spellings = [c.split(" ")[0] for c in choices] + [c.split("(")[-1].rstrip(")") for c in choices if "(" in c]
        raise AotError(f"kernel '{self.kernel}' for {self.target} has no stage or artifact '{name}'"
                       f"{did_you_mean(name, spellings)} (it has: {', '.join(choices)})")

    def write(self, directory: str | os.PathLike) -> list[Path]:
        """Write :meth:`outputs` into ``directory`` (created when needed); returns the paths."""
        folder = Path(directory)
        written = []
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for name, content in self.outputs().items():
                path = folder / name
                if isinstance(content, bytes):
                    path.write_bytes(content)
                else:
                    path.write_text(content, encoding="utf-8")
                written.append(path)
        except OSError as exc:
            where = exc.filename or folder
            raise AotError(f"cannot write the output of kernel '{self.kernel}' to '{where}': "
                           f"{exc.strerror or exc}") from None
        self.files = written
        return written


def compile_kernel(fn_or_path_spec: Any, *, target: Any, signature: str | Sequence[str],
                   constexprs: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
                   output_dir: str | os.PathLike | None = None,
                   target_source: str = "target= argument") -> AotResult:
    """Compile one specialization of a ``@jit`` kernel for ``target`` without running it.

    :param fn_or_path_spec: a ``@jit`` function, or ``"path/to/file.py:kernel"``.
    :param target: ``"nvidia:sm_90a"``, ``"amd:gfx942"``, ``"interp"`` (None: the
        configured target).
    :param signature: the run-time parameters' types, in order: ``"*fp32:16,*fp32,i32"``
        or a list of such entries.
    :param constexprs: a value for each constexpr parameter (those with a default may be
        left out).
    :param options: backend options (``{"num_warps": 8}``).
    :param output_dir: write every file (:meth:`AotResult.write`) there.
    """
    from .compiler import compile_module
    from .frontend.codegen import generate_kernel
    from .passes.instrumentation import file_artifacts

    fn = load_kernel(fn_or_path_spec) if isinstance(fn_or_path_spec, (str, os.PathLike)) else fn_or_path_spec
    while not getattr(fn, "__polytile_jit__", False) and getattr(fn, "fn", None) is not None:
        fn = fn.fn
    if not getattr(fn, "__polytile_jit__", False):
        raise AotError(f"compile_kernel needs a @jit function or 'FILE.py:KERNEL', got {fn!r}")
    name = fn.__name__
    entries = parse_signature(signature)
    constexpr_names = fn.constexpr_names()
    runtime = [p for p in fn.param_names if p not in constexpr_names]
    if len(entries) != len(runtime):
        raise AotError(f"kernel '{name}' has {len(runtime)} run-time parameter{'s' if len(runtime) != 1 else ''} "
                       f"({', '.join(runtime) or 'none'}), but the signature gives {len(entries)} type"
                       f"{'s' if len(entries) != 1 else ''}: one entry per run-time parameter, in order "
                       "(constexpr parameters take values instead)")
    values = _constexpr_values(fn, dict(constexprs or {}), runtime)
    arg_types = {param: entry.type for param, entry in zip(runtime, entries)}
    from .runtime.jit import attach_hints, launch_facts

    module, _ = generate_kernel(fn, arg_types, values, launch=launch_facts(target, dict(options or {}), target_source))

    attach_hints(module, [entry.hint for entry in entries])
    result = compile_module(module, target, label=name, record_stages=True, target_source=target_source,
                            **dict(options or {}))
    stages = list(result.stages)
    if stages and stages[0].name == "input":
        stages[0] = stages[0]._replace(name="frontend")
    aot = AotResult(name, result.target, stages, file_artifacts(result.artifacts), {}, result)
    aot.metadata = _metadata(aot, runtime, entries, values)
    if output_dir is not None:
        aot.write(output_dir)
    return aot


def _metadata(aot: AotResult, runtime: list[str], entries: list[SignatureEntry], values: dict) -> dict[str, Any]:
    from . import __version__
    from .ir import types as t
    from .language import core as lc

    result = aot.result
    compiled = result.metadata
    params = [LaunchParam(param, entry.type, entry.divisibility, entry.equal_to_1)
              for param, entry in zip(runtime, entries)]
    scratch = int(compiled.get(GLOBAL_SCRATCH_BYTES, 0))
    if scratch:
        # The hidden last parameter: global_scratch_bytes per program of the grid, at
        # global_scratch_alignment (docs/gpu-memory.md); the caller allocates it.
        params.append(LaunchParam(GLOBAL_SCRATCH_PARAMETER, t.PointerType(t.i8), 16))
    try:
        slots, total = result.backend.argument_layout(kernel_name=compiled.get("kernel_name", aot.kernel),
                                                      params=params, metadata=compiled)
    except ValueError as exc:
        raise AotError(f"kernel '{aot.kernel}' for {result.target}: {exc}") from None
    arguments = [{"name": param, "type": str(entry), "ir_type": str(entry.type), "size": slot.size,
                  "alignment": slot.alignment, "offset": slot.offset, "divisibility": entry.divisibility,
                  "equal_to_1": entry.equal_to_1}
                 for param, entry, slot in zip(runtime, entries, slots)]
    if scratch:
        slot = slots[len(runtime)]
        arguments.append({"name": GLOBAL_SCRATCH_PARAMETER, "type": "*i8", "ir_type": str(params[-1].type),
                          "size": slot.size, "alignment": slot.alignment, "offset": slot.offset,
                          "divisibility": 16, "equal_to_1": False, "hidden": True})
    options = dataclasses.asdict(result.options) if dataclasses.is_dataclass(result.options) else {}
    metadata: dict[str, Any] = {
        "kernel_name": compiled.get("kernel_name", aot.kernel),
        "target": str(result.target),
        "num_warps": compiled.get("num_warps", options.get("num_warps")),
        "shared_bytes": compiled.get("shared_bytes", 0),
        "signature": ",".join(str(entry) for entry in entries),
        "arguments": arguments,
        "parameter_bytes": total,
        "constexprs": {k: _jsonable(lc.unwrap(v)) for k, v in values.items()},
        "options": {k: _jsonable(v) for k, v in options.items()},
        "polytile_version": __version__,
        "versions": dict(result.backend.versions()),
    }
    # What a backend adds to its compile metadata (beyond the keys above) is kept too.
    for key, value in compiled.items():
        metadata.setdefault(key, value)
    metadata["stages"] = [aot.stage_file(i) for i in range(len(aot.stages))]
    metadata["files"] = aot.artifact_files()
    return metadata


def _constexpr_values(fn: Any, given: dict[str, Any], runtime: list[str]) -> dict[str, Any]:
    name = fn.__name__
    names = [p for p in fn.param_names if p not in runtime]
    for key in given:
        if key in runtime:
            raise AotError(f"kernel '{name}': '{key}' is a run-time parameter, not a constexpr; give its type in the "
                           "signature")
        if key not in names:
            known = f" (its constexpr parameters: {', '.join(names)})" if names else " (it has none)"
            raise AotError(f"kernel '{name}' has no constexpr parameter '{key}'{did_you_mean(key, names)}{known}")
    values = {}
    for param in names:
        if param in given:
            values[param] = given[param]
            continue
        default = fn.signature.parameters[param].default
        if default is fn.signature.parameters[param].empty:
            raise AotError(f"kernel '{name}': constexpr parameter '{param}' needs a value (--constexpr {param}=VALUE, "
                           f"or constexprs={{'{param}': ...}})")
        values[param] = default
    return values


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return repr(value) if not isinstance(value, Path) else str(value)
