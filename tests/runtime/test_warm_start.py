"""A launch from a warm disk cache: what it imports and what its key still covers.

A new process that finds its kernel in the disk cache needs the kernel's key (the
sources, the globals they read, the options, the versions), not the compiler: these
tests keep the frontend, the dialects and the IR's operations off that path, and check
that what was taken off it did not take anything out of the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from polytile.runtime.cache import dependency_hash, jit_dependencies, source_tree_hash

#: Modules a launch from the disk cache (of a GPU kernel, whose binary is in the entry) must not import.
COMPILER_MODULES = ("polytile.dialects", "polytile.frontend.codegen", "polytile.ir.operation", "polytile.ir.printer",
                    "polytile.ir.parser", "polytile.language.standard", "polytile.passes.manager")


def _kernel_module(directory: Path, name: str = "warm_kernels") -> Path:
    path = directory / f"{name}.py"
    path.write_text(textwrap.dedent("""
        import polytile as pt
        import polytile.language as pl

        SCALE = 3

        @pt.jit
        def helper(x):
            return x * SCALE

        @pt.jit
        def kernel(x_ptr, out_ptr, n, BLOCK: pl.constexpr):
            offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
            mask = offs < n
            pl.store(out_ptr + offs, helper(pl.load(x_ptr + offs, mask=mask)), mask=mask)
    """))
    return path


def _child(directory: Path, script: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(directory), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=directory, env=env,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_key_of_a_kernel_needs_no_compiler_module(tmp_path):
    _kernel_module(tmp_path)
    found = _child(tmp_path, f"""
        import json, sys
        from polytile.ir import types as t
        from polytile.runtime.cache import dependency_hash, global_snapshot, polytile_source_hash
        import warm_kernels
        dependency_hash(warm_kernels.kernel)
        global_snapshot(warm_kernels.kernel)
        polytile_source_hash()
        spelled = str(t.PointerType(t.f32))  # the specialization key spells each type
        print(json.dumps({{"loaded": [m for m in {COMPILER_MODULES!r} if m in sys.modules], "spelled": spelled}}))
    """)
    assert found == {"loaded": [], "spelled": "ptr<f32>"}


def test_the_key_does_not_depend_on_which_language_modules_are_imported(tmp_path):
    # The language's builtins load on first use, and the key's walk no longer loads them:
    # a process that has traced a kernel (and so imported them) must get the same key.
    _kernel_module(tmp_path)
    found = _child(tmp_path, """
        import json
        import polytile.language as pl
        from polytile.runtime.cache import dependency_hash
        import warm_kernels
        before = dependency_hash(warm_kernels.kernel)
        pl.load, pl.store, pl.arange, pl.program_id  # what tracing the kernel imports
        print(json.dumps({"same": dependency_hash(warm_kernels.kernel) == before}))
    """)
    assert found == {"same": True}


def test_a_helper_behind_a_lazy_module_attribute_is_still_a_dependency(tmp_path, monkeypatch):
    # A user's module may provide names on first use (PEP 562) too; only polytile's own
    # modules are read without triggering that.
    (tmp_path / "lazy_real.py").write_text(textwrap.dedent("""
        import polytile as pt

        @pt.jit
        def helper(x):
            return x + 1
    """))
    (tmp_path / "lazy_helpers.py").write_text(textwrap.dedent("""
        def __getattr__(name):
            if name == "helper":
                from lazy_real import helper
                return helper
            raise AttributeError(name)
    """))
    (tmp_path / "lazy_kernels.py").write_text(textwrap.dedent("""
        import polytile as pt
        import lazy_helpers

        @pt.jit
        def kernel(x):
            return lazy_helpers.helper(x)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazy_kernels
    import lazy_real

    assert lazy_real.helper in jit_dependencies(lazy_kernels.kernel)
    before = dependency_hash(lazy_kernels.kernel)
    path = tmp_path / "lazy_real.py"
    path.write_text(path.read_text().replace("x + 1", "x + 100"))
    lazy_real.helper._source = None  # as a new process would read it
    assert dependency_hash(lazy_kernels.kernel) != before


def test_the_source_tree_hash_walks_in_os_walk_order(tmp_path):
    # Entries keyed by the old walk stay valid: the same files in the same order.
    import hashlib

    for relative in ("b.py", "a/z.py", "a/b/c.py", "a/y.txt", "c/__pycache__/x.py", "c/d.py", "a.py"):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(relative)
    expected = hashlib.sha256()
    for directory, subdirectories, files in os.walk(tmp_path):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(directory, name)
            info = os.stat(path)
            relative = os.path.relpath(path, tmp_path).replace(os.sep, "/")
            expected.update(f"{relative}\0{info.st_size}\0{info.st_mtime_ns}\1".encode())
    assert source_tree_hash(str(tmp_path)) == expected.hexdigest()


def test_backend_versions_are_read_without_importlib_metadata(tmp_path):
    # A backend's versions enter the key of every launch; importlib.metadata costs 20-60 ms.
    found = _child(tmp_path, """
        import json, sys
        from polytile.backend import installed_versions
        versions = installed_versions("numpy", "not-installed-anywhere")
        print(json.dumps({"versions": versions, "metadata": "importlib.metadata" in sys.modules}))
    """)
    import numpy

    assert found == {"versions": {"numpy": numpy.__version__}, "metadata": False}


def test_no_name_polytile_provides_on_first_use_could_enter_a_key():
    # Why the key's walk may skip them (cache._module_attribute): were one a @jit function
    # or a compile-time constant, the key would depend on whether it had been imported.
    import polytile
    import polytile.language as pl
    from polytile.runtime.cache import _is_constant

    lazy = [(pl, name) for name in pl._HOMES] + [(polytile, name) for name in polytile._RUNTIME_NAMES]
    for module, name in lazy:
        value = getattr(module, name)
        assert isinstance(value, type) or not getattr(value, "__polytile_jit__", False), name  # JITFunction itself
        assert not _is_constant(value), name


def test_a_warm_interpreter_launch_runs_no_frontend(tmp_path, monkeypatch):
    # The interpreter runs the cached IR (it needs the dialects), but a kernel found in the
    # disk cache is not generated again: the frontend stays unimported (a launch's facts
    # for pl.extra.cuda.num_warps() are made only where the frontend runs).
    _kernel_module(tmp_path)
    script = """
        import json, sys
        import numpy as np
        import warm_kernels
        x = np.arange(8, dtype=np.float32)
        out = np.zeros(8, np.float32)
        warm_kernels.kernel[(1,)](x, out, 8, BLOCK=8, target="interp")
        print(json.dumps({"frontend": "polytile.frontend.codegen" in sys.modules, "out": out.tolist()}))
    """
    monkeypatch.setenv("POLYTILE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("POLYTILE_CACHE", raising=False)
    first = _child(tmp_path, script)
    second = _child(tmp_path, script)
    assert first["frontend"] is True and second["frontend"] is False
    assert second["out"] == [3.0 * i for i in range(8)]
