"""PTX to cubin: ptxas and nvJitLink, the choice between them, and assembler errors.

The ptxas tests run wherever a ptxas is found (CUDA toolkit, nvidia-cuda-nvcc wheel,
PATH); the nvJitLink one wherever libnvJitLink loads; the rest use fakes.
"""

from __future__ import annotations

import stat
import struct
import sys
import types
import warnings
from pathlib import Path

import pytest

from polytile import config
from polytile.errors import ConfigError
from polytile.plugins import distributions
from polytile_nvidia import NvidiaOptions, assemble, toolkit
from polytile_nvidia.assemble import (AssembleFlags, AssemblerUnavailableError, 
                                      PTXAssemblyError, ptx_to_cubin, select_assembler)

from .ptx_kernels import BROKEN_LINE, BROKEN_VECTOR_ADD, SETMAXNREG, VECTOR_ADD


@pytest.fixture(autouse=True)
def _fresh_toolchain_state():
    assemble.clear_caches()
    yield
    assemble.clear_caches()


@pytest.fixture
def no_nvjitlink(monkeypatch):
    def missing():
        raise RuntimeError('Failure finding "libnvJitLink.so.13"')

    monkeypatch.setattr(assemble, "_load_nvjitlink", missing)


def cubin_sm(cubin: bytes) -> int:
    """The SM number an NVIDIA cubin was built for, from its ELF header's e_flags."""
    assert cubin[:4] == b"\x7fELF"
    flags = struct.unpack_from("<I", cubin, 0x30)[0]
    # ELF ABI version 8 (CUDA 12.8+) moved the SM number up one byte.
    return (flags >> 8) & 0xFF if cubin[8] >= 8 else flags & 0xFF


# -- ptxas -----------------------------------------------------------------------------


@pytest.mark.parametrize("arch, sm", [("sm_80", 80), ("sm_90a", 90)])
def test_vector_add_assembles_with_ptxas(ptxas, arch, sm):
    cubin = ptx_to_cubin(VECTOR_ADD, arch, kernel_name="add_kernel", assembler="ptxas")
    assert cubin_sm(cubin) == sm
    assert b"add_kernel" in cubin


def test_options_reach_ptxas(ptxas):
    options = NvidiaOptions(maxnreg=32, enable_fp_fusion=False, debug=True)
    cubin = ptx_to_cubin(VECTOR_ADD, "sm_90a", kernel_name="add_kernel", options=options, assembler="ptxas")
    assert cubin_sm(cubin) == 90


def test_broken_ptx_names_kernel_and_quotes_the_line(ptxas):
    with pytest.raises(PTXAssemblyError) as info:
        ptx_to_cubin(BROKEN_VECTOR_ADD, "sm_90a", kernel_name="add_kernel", assembler="ptxas")
    error = info.value
    message = str(error)
    assert message.startswith(f"kernel 'add_kernel': ptxas ({ptxas}) failed to assemble its PTX for sm_90a:")
    assert f"ptxas add_kernel.ptx, line {BROKEN_LINE}; error" in message
    assert "Unknown symbol '%bogus'" in message
    assert error.lines == [BROKEN_LINE]
    assert f"> {BROKEN_LINE} | \tadd.f32 \t%f3, %f2, %bogus;" in message
    assert f"  {BROKEN_LINE - 1} | \tld.global.f32 \t%f2, [%rd6];" in message
    assert "polytile-ptxas-" not in message  # the scratch file's path is replaced by the kernel's name
    assert error.ptx == BROKEN_VECTOR_ADD


def test_configured_ptxas_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYTILE_PTXAS", str(tmp_path / "nowhere" / "ptxas"))
    with pytest.raises(ConfigError) as info:
        assemble.find_ptxas()
    assert "setting 'ptxas_path' (from environment variable POLYTILE_PTXAS)" in str(info.value)
    assert "does not exist" in str(info.value)


def _fake_ptxas(directory: Path, version: str = "13.0.88") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "ptxas"
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release 13.0, V{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_ptxas_under_cuda_home_is_found_first(monkeypatch, tmp_path):
    fake = _fake_ptxas(tmp_path / "cuda" / "bin")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert assemble.find_ptxas() == fake
    assert assemble.ptxas_version() == "13.0.88"


def test_ptxas_from_the_nvcc_wheel(monkeypatch, tmp_path):
    fake = _fake_ptxas(tmp_path / "site" / "nvidia" / "cu13" / "bin")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PATH", "")
    assert assemble.find_ptxas() == fake


def test_missing_ptxas_lists_every_place_looked(monkeypatch, tmp_path):
    # The backend's settings are read before sys.path loses the installed distributions
    # (a test that reset the plugins first would otherwise leave 'ptxas_path' unknown).
    config.get("ptxas_path")
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.setattr(toolkit, "COMMON_CUDA_ROOTS", (str(tmp_path / "usr-local-cuda"),))
    with pytest.raises(toolkit.ToolkitNotFoundError) as info:
        assemble.find_ptxas()
    message = str(info.value)
    assert message.startswith("ptxas not found; looked in:")
    assert f"{tmp_path / 'cuda' / 'bin' / 'ptxas'} (cuda_home, from environment variable CUDA_HOME)" in message
    assert "the nvidia-cuda-nvcc wheel (pip install nvidia-cuda-nvcc): no nvidia/ package on sys.path" in message
    assert "PATH: no ptxas" in message
    assert f"{tmp_path / 'usr-local-cuda' / 'bin' / 'ptxas'} (system CUDA toolkit)" in message
    assert "set ptxas_path (POLYTILE_PTXAS)" in message


def test_ptxas_flags():
    flags = AssembleFlags.from_options(NvidiaOptions(maxnreg=64, enable_fp_fusion=False, debug=True))
    assert assemble.PtxasAssembler().flags("sm_90a", flags) == [
        "--gpu-name=sm_90a", "-O3", "--verbose", "--maxrregcount=64", "--fmad=false", "--generate-line-info"]
    # --verbose always: its report of registers and spills is the kernel's resources record.
    assert assemble.PtxasAssembler().flags("sm_80", AssembleFlags.from_options(None)) == [
        "--gpu-name=sm_80", "-O3", "--verbose"]


# -- choosing the assembler ------------------------------------------------------------


@pytest.mark.parametrize("explicit", [None, "auto"])
def test_auto_falls_back_to_ptxas_silently(no_nvjitlink, explicit):
    assert config.get("nvidia_assembler") == "auto"  # the default
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert select_assembler(explicit) == "ptxas"


def test_explicit_nvjitlink_without_the_library_is_an_error(no_nvjitlink):
    config.set(nvidia_assembler="nvjitlink")
    with pytest.raises(AssemblerUnavailableError) as info:
        select_assembler()
    message = str(info.value)
    assert "nvidia_assembler is 'nvjitlink' (from polytile.config.set())" in message
    assert "libnvJitLink could not be loaded" in message
    assert "set nvidia_assembler to 'ptxas'" in message


def test_ptxas_setting_never_loads_nvjitlink(monkeypatch):
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: pytest.fail("nvJitLink was loaded"))
    config.set(nvidia_assembler="ptxas")
    assert select_assembler() == "ptxas"


def test_toolchain_versions_name_the_assembler(no_nvjitlink, monkeypatch, tmp_path):
    monkeypatch.setenv("POLYTILE_PTXAS", str(_fake_ptxas(tmp_path, "12.8.93")))
    config.set(nvidia_assembler="ptxas")
    assert assemble.toolchain_versions() == {"nvidia-assembler": "ptxas 12.8.93"}


def test_toolchain_versions_never_raise(no_nvjitlink):
    config.set(nvidia_assembler="nvjitlink")
    assert assemble.toolchain_versions() == {"nvidia-assembler": "unavailable (AssemblerUnavailableError)"}


# -- nvJitLink -------------------------------------------------------------------------


class FakeNvJitLinkError(Exception):
    pass


def fake_nvjitlink(error_log: str = "", info_log: str = ""):
    calls = []

    def complete(handle):
        calls.append(("complete", handle))
        if error_log:
            raise FakeNvJitLinkError("ERROR_PTX_COMPILE")

    module = types.SimpleNamespace(
        InputType=types.SimpleNamespace(PTX=2),
        nvJitLinkError=FakeNvJitLinkError,
        version=lambda: (13, 0),
        create=lambda n, options: calls.append(("create", n, list(options))) or 77,
        add_data=lambda handle, kind, data, size, name: calls.append(("add_data", handle, kind, data, size, name)),
        complete=complete,
        get_linked_cubin_size=lambda handle: 4,
        get_linked_cubin=lambda handle, buffer: buffer.__setitem__(slice(0, 4), b"CUBN"),
        get_error_log_size=lambda handle: len(error_log) + 1,
        get_error_log=lambda handle, buffer: buffer.__setitem__(slice(0, len(error_log)), error_log.encode()),
        get_info_log_size=lambda handle: len(info_log) + 1,
        get_info_log=lambda handle, buffer: buffer.__setitem__(slice(0, len(info_log)), info_log.encode()),
        destroy=lambda handle: calls.append(("destroy", handle)),
    )
    return module, calls


def nvjitlink_versions(version: str = "13.0") -> dict:
    """toolchain_versions() with nvJitLink at 'auto': the ptxas that whole-program kernels get beside it."""
    return {"nvidia-assembler": f"nvjitlink {version}",
            "nvidia-whole-program-assembler": assemble.whole_program_assembler() or "none"}


def _new_process() -> None:
    """Forget what this process found, keeping what the cache directory remembers."""
    assemble._nvjitlink.cache_clear()
    assemble._ptxas_version.cache_clear()


def test_toolchain_versions_are_remembered_in_the_cache_directory(monkeypatch):
    module, _ = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    expected = nvjitlink_versions()
    assert assemble.toolchain_versions() == expected
    assert list((Path(config.get("cache_dir")) / "toolchains").glob("nvidia-*.json"))
    _new_process()
    # A launch from the disk cache needs the key only: nvJitLink is not loaded for it.
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: pytest.fail("nvJitLink was loaded"))
    assert assemble.toolchain_versions() == expected


def test_the_toolchain_memo_follows_the_umask(monkeypatch):
    """It was created 0600 (mkstemp): a cache directory shared by a team probed again for everyone else."""
    import os

    module, _ = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    old = os.umask(0o002)
    try:
        assemble.toolchain_versions()
    finally:
        os.umask(old)
    (memo,) = (Path(config.get("cache_dir")) / "toolchains").glob("nvidia-*.json")
    assert memo.stat().st_mode & 0o777 == 0o664


def test_a_changed_toolchain_is_probed_again(monkeypatch, tmp_path):
    module, _ = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    assert assemble.toolchain_versions() == nvjitlink_versions()
    _new_process()
    module.version = lambda: (13, 1)
    folder = tmp_path / "nvidia_nvjitlink-13.1.0.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nvjitlink\nVersion: 13.1.0\n\n")
    installed = [distributions.Distribution(str(folder), "nvidia-nvjitlink")]
    monkeypatch.setattr(distributions, "distributions", lambda: installed)
    assert assemble.toolchain_versions() == nvjitlink_versions("13.1")
    _new_process()
    monkeypatch.setenv("POLYTILE_PTXAS", str(_fake_ptxas(tmp_path / "bin", "12.8.93")))
    config.set(nvidia_assembler="ptxas")
    assert assemble.toolchain_versions() == {"nvidia-assembler": "ptxas 12.8.93"}


def test_an_unavailable_assembler_is_not_remembered(no_nvjitlink, monkeypatch, tmp_path):
    config.set(nvidia_assembler="nvjitlink")
    assert assemble.toolchain_versions() == {"nvidia-assembler": "unavailable (AssemblerUnavailableError)"}
    assert not list((Path(config.get("cache_dir")) / "toolchains").glob("*.json"))


def test_a_corrupt_memo_is_probed_again(monkeypatch):
    module, _ = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    assemble.toolchain_versions()
    (memo,) = (Path(config.get("cache_dir")) / "toolchains").glob("nvidia-*.json")
    memo.write_text('{"nvidia-assembler": ')
    _new_process()
    assert assemble.toolchain_versions() == nvjitlink_versions()


def test_without_the_cache_nothing_is_remembered(monkeypatch):
    module, _ = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    config.set(cache=False)
    assert assemble.toolchain_versions() == nvjitlink_versions()
    assert not (Path(config.get("cache_dir")) / "toolchains").exists()


def test_nvjitlink_links_in_process(monkeypatch):
    module, calls = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    options = NvidiaOptions(maxnreg=40, enable_fp_fusion=False)
    assert ptx_to_cubin(VECTOR_ADD, "sm_90a", kernel_name="add_kernel", options=options) == b"CUBN"
    data = VECTOR_ADD.encode()
    assert calls == [
        ("create", 5, ["-arch=sm_90a", "-O3", "-verbose", "-maxrregcount=40", "-Xptxas=--fmad=false"]),
        ("add_data", 77, 2, data, len(data), "add_kernel.ptx"),
        ("complete", 77),
        ("destroy", 77),
    ]
    assert assemble.toolchain_versions() == nvjitlink_versions()


def test_nvjitlinks_verbose_report_comes_back_with_the_cubin(monkeypatch):
    report = "ptxas info    : Used 12 registers, used 0 barriers\n"
    module, _ = fake_nvjitlink(info_log=report)
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    assembled = assemble.assemble_ptx(VECTOR_ADD, "sm_90a", kernel_name="add_kernel")
    assert (assembled.cubin, assembled.log) == (b"CUBN", report)


def test_ptxas_verbose_report_comes_back_with_the_cubin(ptxas):
    assembled = assemble.assemble_ptx(VECTOR_ADD, "sm_90a", kernel_name="add_kernel", assembler="ptxas")
    assert "Function properties for add_kernel" in assembled.log and "Used " in assembled.log
    assert "bytes spill stores" in assembled.log
    assert "/tmp" not in assembled.log  # the scratch file is named after the kernel


def test_nvjitlink_error_quotes_the_line(monkeypatch):
    log = f"ERROR NVJITLINK_ERROR_PTX_COMPILE: JIT the PTX (add_kernel.ptx)\n" \
          f"ptxas application ptx input, line {BROKEN_LINE}; error   : Unknown symbol '%bogus'"
    module, calls = fake_nvjitlink(log)
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    with pytest.raises(PTXAssemblyError) as info:
        ptx_to_cubin(BROKEN_VECTOR_ADD, "sm_80", kernel_name="add_kernel")
    assert str(info.value).startswith("kernel 'add_kernel': nvJitLink failed to assemble its PTX for sm_80:")
    assert f"> {BROKEN_LINE} | \tadd.f32 \t%f3, %f2, %bogus;" in str(info.value)
    assert calls[-1] == ("destroy", 77)


@pytest.mark.skipif(assemble.nvjitlink_problem() is not None, reason="libnvJitLink cannot be loaded here")
@pytest.mark.parametrize("arch, sm", [("sm_80", 80), ("sm_90a", 90)])
def test_real_nvjitlink(arch, sm):
    cubin = ptx_to_cubin(VECTOR_ADD, arch, kernel_name="add_kernel", assembler="nvjitlink")
    assert cubin_sm(cubin) == sm
    with pytest.raises(PTXAssemblyError) as info:
        ptx_to_cubin(BROKEN_VECTOR_ADD, arch, kernel_name="add_kernel", assembler="nvjitlink")
    assert info.value.lines == [BROKEN_LINE]


# -- kernels that need whole-program compilation ----------------------------------------


def test_setmaxnreg_is_a_whole_program_feature():
    assert assemble.whole_program_feature(SETMAXNREG) == "setmaxnreg (register reallocation between warp groups)"
    assert assemble.whole_program_feature(VECTOR_ADD) is None
    # Only an instruction counts, not the word in a comment.
    assert assemble.whole_program_feature(VECTOR_ADD.replace("{", "{\n\t// no setmaxnreg.inc here", 1)) is None


@pytest.fixture
def fake_nvjitlink_loaded(monkeypatch):
    module, calls = fake_nvjitlink()
    monkeypatch.setattr(assemble, "_load_nvjitlink", lambda: module)
    return calls


@pytest.fixture
def no_ptxas(monkeypatch):
    def missing():
        raise toolkit.ToolkitNotFoundError("ptxas", ["nowhere"], "install one")

    monkeypatch.setattr(assemble, "find_ptxas", missing)


def test_auto_gives_setmaxnreg_to_ptxas(fake_nvjitlink_loaded, monkeypatch, tmp_path):
    monkeypatch.setenv("POLYTILE_PTXAS", str(_fake_ptxas(tmp_path, "13.0.88")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert select_assembler(ptx=SETMAXNREG, kernel_name="ws_kernel") == "ptxas"
        assert select_assembler(ptx=VECTOR_ADD, kernel_name="add_kernel") == "nvjitlink"
    assert assemble.toolchain_versions() == {"nvidia-assembler": "nvjitlink 13.0",
                                             "nvidia-whole-program-assembler": "ptxas 13.0.88"}


def test_without_ptxas_setmaxnreg_is_linked_with_a_warning(fake_nvjitlink_loaded, no_ptxas):
    with pytest.warns(RuntimeWarning) as caught:
        assembled = assemble.assemble_ptx(SETMAXNREG, "sm_90a", kernel_name="ws_kernel")
    assert assembled.assembler == "nvjitlink"
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith("kernel 'ws_kernel': its PTX uses setmaxnreg (register reallocation between warp groups)")
    assert "ptxas C7504" in message and "no ptxas executable was found" in message
    assert "pip install nvidia-cuda-nvcc" in message and "ptxas_path (POLYTILE_PTXAS)" in message
    # Once per kernel and process.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assemble.assemble_ptx(SETMAXNREG, "sm_90a", kernel_name="ws_kernel")
    assert assemble.toolchain_versions() == {"nvidia-assembler": "nvjitlink 13.0",
                                             "nvidia-whole-program-assembler": "none"}


def test_a_ptxas_older_than_nvjitlink_is_not_given_setmaxnreg(fake_nvjitlink_loaded, monkeypatch, tmp_path):
    # A CUDA 12.0 ptxas on the PATH beside CUDA 13.0's nvJitLink may not read the PTX ISA
    # version LLVM writes for nvJitLink: linked instead, with the reason in the warning.
    old = _fake_ptxas(tmp_path, "12.0.76")
    monkeypatch.setenv("POLYTILE_PTXAS", str(old))
    with pytest.warns(RuntimeWarning, match=r"the ptxas found \(.*12\.0\.76\) is older than nvJitLink \(13\.0\)"):
        assert select_assembler(ptx=SETMAXNREG, kernel_name="ws_kernel_old") == "nvjitlink"
    assert assemble.toolchain_versions() == {"nvidia-assembler": "nvjitlink 13.0",
                                             "nvidia-whole-program-assembler": "none"}


def test_chosen_nvjitlink_links_setmaxnreg_with_a_warning(fake_nvjitlink_loaded, monkeypatch, tmp_path):
    monkeypatch.setenv("POLYTILE_PTXAS", str(_fake_ptxas(tmp_path, "13.0.88")))
    config.set(nvidia_assembler="nvjitlink")
    with pytest.warns(RuntimeWarning, match="nvidia_assembler is 'nvjitlink'.*set nvidia_assembler to 'auto' or 'ptxas'"):
        assert select_assembler(ptx=SETMAXNREG, kernel_name="ws_kernel_2") == "nvjitlink"
    # What the user chose is what runs, and all the key needs to say.
    assert assemble.toolchain_versions() == {"nvidia-assembler": "nvjitlink 13.0"}


@pytest.mark.skipif(assemble.nvjitlink_problem() is not None, reason="libnvJitLink cannot be loaded here")
def test_real_assemblers_on_setmaxnreg(ptxas):
    """Why 'auto' sends such PTX to ptxas: nvJitLink's relocatable compilation drops setmaxnreg (C7504)."""
    linked = assemble.assemble_ptx(SETMAXNREG, "sm_90a", kernel_name="ws_kernel_3", assembler="nvjitlink")
    assert "(C7504)" in linked.log and "'setmaxnreg' ignored" in linked.log
    whole = assemble.assemble_ptx(SETMAXNREG, "sm_90a", kernel_name="ws_kernel_3")
    assert whole.assembler == "ptxas"
    assert "C7504" not in whole.log and "Used 168 registers" in whole.log
    assert cubin_sm(whole.cubin) == 90


# -- quoting ---------------------------------------------------------------------------


def test_quote_marks_named_lines_with_context():
    ptx = "\n".join(f"l{i}" for i in range(1, 11))
    assert assemble.quote_ptx(ptx, [2, 9]) == "\n".join([
        "PTX lines 2, 9:", "     1 | l1", "  >  2 | l2", "     3 | l3", "    ..", "     8 | l8", "  >  9 | l9",
        "    10 | l10"])


def test_referenced_lines_ignore_numbers_outside_the_ptx():
    assert assemble.referenced_lines("x, line 3; error\ny, line 99; error\nz, line 3; again", "a\nb\nc\nd") == [3]
