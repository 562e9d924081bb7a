"""Scratch files of the external tools (ld.lld for AMD, ptxas for NVIDIA): a full disk or
an unusable TMPDIR is the backend's error saying so, never an internal compiler error."""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np
import pytest

import polytile as pt
import polytile.language as pl
from polytile import config
from polytile.compiler import compile_module
from polytile.errors import PassFailure

from tests.toolchains import ptxas_or_skip


@pt.jit
def add(x, y, out, n, BLOCK: pl.constexpr):
    offs = pl.program_id(0) * BLOCK + pl.arange(0, BLOCK)
    mask = offs < n
    pl.store(out + offs, pl.load(x + offs, mask=mask) + pl.load(y + offs, mask=mask), mask=mask)


def _amd():
    from polytile_amd.errors import LinkError

    return "amd:gfx942", "ld.lld", LinkError, {}


def _nvidia():
    from polytile_nvidia.assemble import AssemblerUnavailableError

    ptxas_or_skip()
    return "nvidia:sm_90a", "ptxas", AssemblerUnavailableError, {"nvidia_assembler": "ptxas"}


@pytest.mark.parametrize("backend", [_amd, _nvidia], ids=["amd-ld.lld", "nvidia-ptxas"])
@pytest.mark.parametrize("problem", ["full-disk", "tmpdir-is-a-file"])
def test_scratch_files_that_cannot_be_written_are_the_backends_error(monkeypatch, tmp_path, backend, problem):
    """A full disk while linking HSACO was 'internal compiler error in pass link-hsaco'."""
    target, tool, error_type, settings = backend()
    if problem == "full-disk":
        import polytile.gpu.scratch as scratch

        class FullDisk(type(tmp_path)):
            def write_bytes(self, data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

            def write_text(self, data, *args, **kwargs):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

        monkeypatch.setattr(scratch, "Path", FullDisk)
        reason = "No space left on device"
    else:
        blocker = tmp_path / "tmp"
        blocker.write_text("a file where TMPDIR points")
        monkeypatch.setattr(tempfile, "tempdir", str(blocker))
        reason = "Not a directory"
    module = add.lower(np.zeros(64, np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32), 64, BLOCK=64)
    with config.override(**settings), pytest.raises(error_type) as info:
        compile_module(module, target)
    assert not isinstance(info.value, PassFailure)
    message = str(info.value)
    assert message.startswith(f"kernel 'add': cannot write the files {tool} works on in the temporary directory ")
    assert reason in message and "point TMPDIR at another directory" in message
