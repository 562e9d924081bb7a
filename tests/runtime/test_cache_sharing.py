"""A cache directory shared by a team: what the cache creates follows the umask.

Cache files used to be created 0600 (tempfile.mkstemp), so every member but the writer
missed: a silent recompile for everyone else.
"""

from __future__ import annotations

import os
import stat
import textwrap
from pathlib import Path

import numpy as np
import pytest

from polytile import config

KERNEL_SOURCE = textwrap.dedent("""
    import polytile.language as pl
    from polytile.runtime import jit

    @jit
    def kernel(out_ptr, n, BLOCK: pl.constexpr):
        offs = pl.arange(0, BLOCK)
        pl.store(out_ptr + offs, offs.to(pl.float32) + 1.0, mask=offs < n)
""")


def _compile_into(cache_dir: Path, directory: Path, umask: int) -> None:
    import importlib.util

    path = directory / "shared_kernel.py"
    path.write_text(KERNEL_SOURCE)
    spec = importlib.util.spec_from_file_location(f"shared_kernel_{umask:o}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = np.zeros(16, np.float32)
    previous = os.umask(umask)
    try:
        with config.override(target="interp", cache_dir=cache_dir):
            module.kernel[(1,)](out, 16, BLOCK=16)
    finally:
        os.umask(previous)
    assert module.kernel.compile_count == 1 and (out == np.arange(16) + 1).all()


def _modes(root: Path) -> dict[str, tuple[str, int]]:
    found = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        kind = "dir" if stat.S_ISDIR(info.st_mode) else "file"
        found[str(path.relative_to(root))] = (kind, stat.S_IMODE(info.st_mode))
    return found


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_every_file_and_directory_follows_the_umask(tmp_path, umask):
    cache_dir = tmp_path / "team-cache"
    _compile_into(cache_dir, tmp_path, umask)
    modes = _modes(cache_dir)
    kinds = {kind for kind, _ in modes.values()}
    assert kinds == {"dir", "file"} and any(name.endswith("metadata.json") for name in modes)
    for name, (kind, mode) in modes.items():
        expected = (0o777 if kind == "dir" else 0o666) & ~umask
        assert mode == expected, f"{name}: {mode:o}, expected {expected:o} under umask {umask:03o}"
    assert any(name.endswith(".lock") for name in modes)  # lock files are shared too


def test_a_setgid_cache_directory_passes_its_group_down(tmp_path):
    # What docs/runtime.md tells a team to do: a group-owned directory with the setgid
    # bit; every directory the cache makes in it keeps the bit (and so the group).
    cache_dir = tmp_path / "team-cache"
    cache_dir.mkdir()
    os.chmod(cache_dir, 0o2775)
    _compile_into(cache_dir, tmp_path, 0o002)
    group = cache_dir.stat().st_gid
    for path in cache_dir.rglob("*"):
        assert path.stat().st_gid == group, path
        if path.is_dir():
            assert path.stat().st_mode & stat.S_ISGID, path
        else:
            assert stat.S_IMODE(path.stat().st_mode) & 0o060 == 0o060, path  # group read and write
