"""The on-disk kernel cache: hits, keys, corruption, concurrent writers, the settings."""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polytile.language as pl
from polytile import config
from polytile.runtime import jit
from polytile.runtime.cache import CacheWarning, KernelCache, jit_dependencies


@pytest.fixture(autouse=True)
def _on_the_interpreter():
    # The kernels here take NumPy arrays: on a machine with a GPU the default target
    # would be the GPU's, which needs device memory.
    with config.override(target="interp"):
        yield


def _write_module(directory: Path, helper_body: str = "return x * 2") -> Path:
    path = directory / "cached_kernels.py"
    path.write_text(textwrap.dedent(f"""
        import polytile.language as pl
        from polytile.runtime import jit

        @jit
        def helper(x):
            {helper_body}

        @jit
        def kernel(out_ptr, n, BLOCK: pl.constexpr):
            offs = pl.arange(0, BLOCK)
            pl.store(out_ptr + offs, helper(offs.to(pl.float32)), mask=offs < n)
    """))
    return path


def _fresh_kernel(path: Path, name: str):
    """A new JITFunction (an empty in-memory cache) from the module's current source."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(p.parent for p in (cache_dir / "kernels").glob("*/*/metadata.json"))


def test_second_process_reads_the_disk_cache(tmp_path, _private_kernel_cache):
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    first = _fresh_kernel(path, "ck_a")
    first[(1,)](out, 16, BLOCK=16)
    assert first.compile_count == 1 and first.disk_hits == 0
    assert len(_entries(_private_kernel_cache)) == 1

    second = _fresh_kernel(path, "ck_b")  # as a new process would: nothing in memory
    out[:] = 0
    compiled = second[(1,)](out, 16, BLOCK=16)
    assert second.compile_count == 0 and second.disk_hits == 1 and compiled.from_disk
    assert (out == np.arange(16) * 2).all()


def test_editing_a_called_helper_invalidates_the_entry(tmp_path, _private_kernel_cache):
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_c")[(1,)](out, 16, BLOCK=16)
    _write_module(tmp_path, helper_body="return x * 3")
    edited = _fresh_kernel(path, "ck_d")
    assert {f.__name__ for f in jit_dependencies(edited)} == {"kernel", "helper"}
    edited[(1,)](out, 16, BLOCK=16)
    assert edited.compile_count == 1 and edited.disk_hits == 0
    assert (out == np.arange(16) * 3).all()
    assert len(_entries(_private_kernel_cache)) == 2


@pytest.mark.parametrize("damage", ["bad json", "truncated ir", "changed ir", "missing ir", "other target"])
def test_a_damaged_entry_is_recompiled_and_overwritten(tmp_path, _private_kernel_cache, damage):
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_e")[(1,)](out, 16, BLOCK=16)
    (entry,) = _entries(_private_kernel_cache)
    metadata, ir = entry / "metadata.json", entry / "kernel.ir"
    if damage == "bad json":
        metadata.write_text(metadata.read_text()[:-20])
    elif damage == "truncated ir":
        ir.write_bytes(ir.read_bytes()[: len(ir.read_bytes()) // 2])
    elif damage == "changed ir":
        ir.write_text(ir.read_text().replace("2.0", "5.0"))
    elif damage == "missing ir":
        ir.unlink()
    else:
        data = json.loads(metadata.read_text())
        data["target"] = "nvidia:sm_90"
        metadata.write_text(json.dumps(data))
    kernel = _fresh_kernel(path, "ck_f")
    out[:] = 0
    with pytest.warns(CacheWarning, match=f"kernel 'kernel': the on-disk cache entry {re.escape(str(entry))} is "
                      r"damaged \(.+\); it was removed and the kernel is compiled again") as caught:
        kernel[(1,)](out, 16, BLOCK=16)
    assert len(caught) == 1
    assert kernel.compile_count == 1 and kernel.disk_hits == 0
    assert (out == np.arange(16) * 2).all()
    again = _fresh_kernel(path, "ck_g")  # the entry was rewritten whole
    again[(1,)](out, 16, BLOCK=16)
    assert again.disk_hits == 1
    assert json.loads(metadata.read_text())["target"] == "interp"


def test_the_target_is_checked_on_load(tmp_path):
    cache = KernelCache(tmp_path)
    from polytile.runtime.cache import CacheEntry

    cache.store(CacheEntry("ab" * 32, "interp", "k", "ir text", {"cubin": b"\x00\x01"}, {"params": []}))
    assert cache.load("ab" * 32, "interp").binaries == {"cubin": b"\x00\x01"}
    assert cache.load("ab" * 32, "nvidia:sm_90") is None
    cache.clear()
    assert cache.load("ab" * 32, "interp") is None


def _resign(metadata_path: Path, change) -> None:
    """Change metadata.json and give it a valid checksum again (as a tool might)."""
    from polytile.runtime.cache_files import metadata_bytes

    fields = json.loads(metadata_path.read_text())
    del fields["checksum"]
    change(fields)
    metadata_path.write_bytes(metadata_bytes(fields))


@pytest.mark.parametrize("change, problem", [
    (lambda f: f.update(target="nvidia:sm_90"), "compiled for target 'nvidia:sm_90', not 'interp'"),
    (lambda f: f.update(extra=[]), "field 'extra' is an array, not an object"),
    (lambda f: f["extra"].update(params="out_ptr"), "'extra.params' is not a list of parameter names"),
    (lambda f: f["extra"].update(hints=["D"]), "'extra.hints' is not one of"),
    (lambda f: f["extra"].update(kernel=4), "'extra.kernel' is an integer, not an object"),
    (lambda f: f.update(binaries=["../evil"]), "lists '../evil', not a binary's name"),
    (lambda f: f.update(binaries=["cubin"]), "field 'files' lists"),
    (lambda f: f["files"].update({"kernel.ir": "0" * 63}), "not a SHA-256"),
    (lambda f: f.update(format=True), "field 'format' is a boolean, not an integer"),
    (lambda f: f.update(name="not a name"), "not a function name"),
    (lambda f: f.update(polytile="0.0.1"), "written by polytile 0.0.1"),
    (lambda f: f.update(surprise=1), "unknown field 'surprise'"),
    (lambda f: f.pop("files"), "has no field 'files'"),
    (lambda f: f.update(key="ab" * 32), "names key abababab"),
])
def test_every_metadata_field_is_checked_even_under_a_valid_checksum(tmp_path, _private_kernel_cache, change,
                                                                     problem):
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_t")[(1,)](out, 16, BLOCK=16)
    (entry,) = _entries(_private_kernel_cache)
    _resign(entry / "metadata.json", change)
    kernel = _fresh_kernel(path, "ck_u")
    with pytest.warns(CacheWarning, match=re.escape(problem)):
        kernel[(1,)](out, 16, BLOCK=16)
    assert kernel.compile_count == 1 and (out == np.arange(16) * 2).all()
    healed = _fresh_kernel(path, "ck_v")
    healed[(1,)](out, 16, BLOCK=16)
    assert healed.disk_hits == 1


def test_an_entry_that_cannot_be_removed_is_compiled_and_not_cached(tmp_path, _private_kernel_cache, monkeypatch):
    # Another user's unreadable entry in a shared cache (umask 077): the warning says
    # what happened and does not claim the entry was replaced.
    import polytile.runtime.cache as cache_module

    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_z1")[(1,)](out, 16, BLOCK=16)
    (entry,) = _entries(_private_kernel_cache)
    (entry / "kernel.ir").write_text("unreadable for us")

    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cache_module, "remove_path", refuse)
    kernel = _fresh_kernel(path, "ck_z2")
    out[:] = 0
    with pytest.warns(CacheWarning, match=r"cannot be used \(the checksum of kernel.ir does not match .*\) and cannot be "
                      r"removed \(Permission denied\); the kernel is compiled and not cached"):
        kernel[(1,)](out, 16, BLOCK=16)
    assert kernel.compile_count == 1 and (out == np.arange(16) * 2).all()
    assert (entry / "kernel.ir").read_text() == "unreadable for us"


def test_a_missing_metadata_file_is_a_plain_miss(tmp_path, _private_kernel_cache, recwarn):
    # A writer killed before its last file: nothing to report, the entry is written again.
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_w")[(1,)](out, 16, BLOCK=16)
    (entry,) = _entries(_private_kernel_cache)
    (entry / "metadata.json").unlink()
    kernel = _fresh_kernel(path, "ck_x")
    kernel[(1,)](out, 16, BLOCK=16)
    assert kernel.compile_count == 1 and not [w for w in recwarn if w.category is CacheWarning]
    assert (entry / "metadata.json").is_file()


def test_a_cache_dir_that_is_a_file_is_an_uncached_compile_not_a_deletion(tmp_path):
    # The entry's own paths are replaced when something else is there; the user's
    # cache_dir is never deleted.
    path = _write_module(tmp_path)
    not_a_directory = tmp_path / "precious.txt"
    not_a_directory.write_text("keep me")
    out = np.zeros(16, np.float32)
    with config.override(cache_dir=not_a_directory):
        kernel = _fresh_kernel(path, "ck_y")
        with pytest.warns(CacheWarning, match="precious.txt \\(setting cache_dir\\) is not a directory; the kernel "
                          "is compiled and not cached"):
            kernel[(1,)](out, 16, BLOCK=16)
    assert kernel.compile_count == 1 and (out == np.arange(16) * 2).all()
    assert not_a_directory.read_text() == "keep me"


def test_cache_setting_off_writes_nothing(tmp_path, _private_kernel_cache):
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    with config.override(cache=False):
        _fresh_kernel(path, "ck_h")[(1,)](out, 16, BLOCK=16)
        kernel = _fresh_kernel(path, "ck_i")
        kernel[(1,)](out, 16, BLOCK=16)
    assert kernel.compile_count == 1 and kernel.disk_hits == 0
    assert _entries(_private_kernel_cache) == []


def test_cache_dir_setting_picks_the_directory(tmp_path):
    path = _write_module(tmp_path)
    with config.override(cache_dir=tmp_path / "elsewhere"):
        _fresh_kernel(path, "ck_j")[(1,)](np.zeros(16, np.float32), 16, BLOCK=16)
    assert len(_entries(tmp_path / "elsewhere")) == 1


def test_constexpr_globals_enter_the_key(tmp_path, _private_kernel_cache):
    path = tmp_path / "global_kernel.py"
    source = textwrap.dedent("""
        import polytile.language as pl
        from polytile.runtime import jit
        SCALE = pl.constexpr({})

        @jit
        def kernel(out_ptr):
            pl.store(out_ptr, SCALE * 1.0)
    """)
    out = np.zeros(1, np.float32)
    path.write_text(source.format(2))
    _fresh_kernel(path, "ck_k")[(1,)](out)
    path.write_text(source.format(7))
    kernel = _fresh_kernel(path, "ck_l")
    kernel[(1,)](out)
    assert kernel.disk_hits == 0 and out[0] == 7


WRITER = """
import sys
import numpy as np
import importlib.util
import polytile.runtime.cache
from polytile import config
polytile.runtime.cache._SOURCE_HASH = sys.argv[3]  # the test's: see pinned_source_hash
config.set(cache_dir=sys.argv[2], target="interp")
out = np.zeros(16, np.float32)
compiles = reads = 0
for _ in range(3):
    # A new kernel object each time (nothing in memory), so each launch goes to the disk cache.
    spec = importlib.util.spec_from_file_location("cached_kernels", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out[:] = 0
    compiled = module.kernel[(1,)](out, 16, BLOCK=16)
    assert (out == np.arange(16) * 2).all(), out
    compiles += module.kernel.compile_count
    reads += module.kernel.disk_hits
print("ok", compiles, reads, compiled.cache_key)
"""


@pytest.fixture
def pinned_source_hash(monkeypatch):
    """The hash of polytile's sources as they are now, for this process and the ones the
    test starts (they set it from the command line).

    The key of an entry holds the hash of polytile's own files, which a process computes
    once.  A test process that computed it long before (an earlier test compiled a
    kernel) holds a stale one if any polytile file changed since (a developer's edit
    during a long run of the suite): its key no longer matched the key of the processes
    it started, and the entry they wrote was a plain miss for it."""
    import polytile.runtime.cache as cache_module

    monkeypatch.setattr(cache_module, "_SOURCE_HASH", None)
    return cache_module.polytile_source_hash()


def test_concurrent_writers_leave_a_valid_entry(tmp_path, pinned_source_hash):
    path = _write_module(tmp_path)
    cache_dir = tmp_path / "shared-cache"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(path), str(cache_dir), pinned_source_hash],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    reports = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        assert stdout.startswith("ok")
        reports.append(stdout.split())
    # One compiled (under the key's lock); every other launch of either read its entry.
    assert sorted((int(compiled), int(read)) for _, compiled, read, _ in reports) == [(0, 3), (1, 2)], reports
    (key,) = {key for *_, key in reports}
    (entry,) = _entries(cache_dir)
    assert entry.name == key
    assert not [p for p in entry.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind
    with config.override(cache_dir=cache_dir):
        kernel = _fresh_kernel(path, "ck_m")
        compiled = kernel[(1,)](np.zeros(16, np.float32), 16, BLOCK=16)
    assert compiled.cache_key == key
    assert kernel.disk_hits == 1


def test_an_option_enters_the_key(tmp_path, _private_kernel_cache):
    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_m")[(1,)](out, 16, BLOCK=16, num_warps=4)
    kernel = _fresh_kernel(path, "ck_n")
    kernel[(1,)](out, 16, BLOCK=16, num_warps=2)
    assert kernel.compile_count == 1 and kernel.disk_hits == 0
    kernel = _fresh_kernel(path, "ck_o")
    kernel[(1,)](out, 16, BLOCK=16, num_warps=4)
    assert kernel.compile_count == 0 and kernel.disk_hits == 1


def test_a_plugin_version_enters_the_key(tmp_path, _private_kernel_cache, monkeypatch):
    from polytile.plugins.manager import PluginManager

    path = _write_module(tmp_path)
    out = np.zeros(16, np.float32)
    _fresh_kernel(path, "ck_p")[(1,)](out, 16, BLOCK=16)
    original = PluginManager.cache_key_components
    monkeypatch.setattr(PluginManager, "cache_key_components",
                        lambda self, target, options: original(self, target, options) + ["polytile-tma==9.9"])
    kernel = _fresh_kernel(path, "ck_q")
    kernel[(1,)](out, 16, BLOCK=16)
    assert kernel.compile_count == 1 and kernel.disk_hits == 0


def test_editing_polytile_itself_changes_the_source_hash(tmp_path):
    import os

    from polytile.runtime.cache import source_tree_hash

    package = tmp_path / "package"
    (package / "passes").mkdir(parents=True)
    (package / "passes" / "fold.py").write_text("FACTOR = 2\n")
    (package / "__init__.py").write_text("")
    before = source_tree_hash(str(package))
    assert source_tree_hash(str(package)) == before
    (package / "passes" / "fold.py").write_text("FACTOR = 3\n")
    info = os.stat(package / "passes" / "fold.py")
    # An edit within the file system's time resolution keeps the size here: move the time too.
    os.utime(package / "passes" / "fold.py", ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    assert source_tree_hash(str(package)) != before
    (package / "passes" / "new_pass.py").write_text("")
    changed = source_tree_hash(str(package))
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "fold.cpython-311.py").write_text("not source")
    assert source_tree_hash(str(package)) == changed


def test_a_gpu_kernel_from_the_disk_cache_parses_its_ir_only_when_asked(tmp_path, _private_kernel_cache):
    from tests.toolchains import ptxas_or_skip

    ptxas_or_skip()
    path = _write_module(tmp_path)
    from polytile.ir import types as t

    arg_types = {"out_ptr": t.PointerType(t.f32), "n": t.i32}
    with config.override(nvidia_assembler="ptxas"):
        first = _fresh_kernel(path, "ck_r").compile(arg_types, {"BLOCK": 16}, target="nvidia:sm_90a")
        second = _fresh_kernel(path, "ck_s").compile(arg_types, {"BLOCK": 16}, target="nvidia:sm_90a")
    assert not first.from_disk and second.from_disk
    assert second.binaries["cubin"] == first.binaries["cubin"]
    assert second._module is None  # the launcher was made from the cubin alone
    assert second.asm["ir"] == first.asm["ir"]


def test_asm_names_what_the_compile_made_even_from_the_disk_cache(tmp_path, _private_kernel_cache):
    # Triton's CompiledKernel.asm: the disk cache keeps the IR and the cubin; the PTX and
    # the LLVM IR come from one compile more, made when first asked for.
    from tests.toolchains import ptxas_or_skip

    ptxas_or_skip()
    path = _write_module(tmp_path)
    from polytile.ir import types as t

    arg_types = {"out_ptr": t.PointerType(t.f32), "n": t.i32}
    with config.override(nvidia_assembler="ptxas"):
        first = _fresh_kernel(path, "ck_t").compile(arg_types, {"BLOCK": 16}, target="nvidia:sm_90a")
        kernel = _fresh_kernel(path, "ck_u")
        second = kernel.compile(arg_types, {"BLOCK": 16}, target="nvidia:sm_90a")
        assert second.from_disk and kernel.compile_count == 0
        assert set(first.asm) == {"ir", "llvm_ir", "llir", "ptx", "cubin"}
        assert second.asm["cubin"] == first.asm["cubin"] and kernel.compile_count == 0
        assert ".entry kernel(" in second.asm["ptx"]  # the kernel's own PTX, compiled again
        assert kernel.compile_count == 1 and second.asm["llir"] == second.asm["llvm_ir"]
        assert second.asm["ptx"] == first.asm["ptx"] and kernel.compile_count == 1  # once
    with pytest.raises(KeyError, match=r"kernel '.*' for nvidia:sm_90a has no 'hsaco'; it has 'ir', "):
        first.asm["hsaco"]
