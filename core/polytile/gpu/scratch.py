"""Scratch files for the external tools a GPU backend runs (ld.lld, ptxas).

Making, writing or reading them can fail for reasons of the machine, not of the
compiler: a full disk, a TMPDIR that is not a directory or not writable. Such a failure
is an error that says so and what to do, in the backend's own error type, never an
internal compiler error of the pass that ran the tool.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Callable, Iterator


@contextlib.contextmanager
def scratch_directory(prefix: str, *, kernel: str, tool: str,
                      error: Callable[[str], Exception]) -> Iterator[Path]:
    """A temporary directory, removed afterwards; an OSError while making or using it
    becomes ``error(message)``, naming the kernel, the tool and the directory."""
    made = None
    try:
        with tempfile.TemporaryDirectory(prefix=prefix) as made:
            yield Path(made)
    except OSError as exc:
        where = made if made is not None else tempfile.gettempdir()
        raise error(f"kernel '{kernel}': cannot write the files {tool} works on in the temporary directory "
                    f"{where}: {exc.strerror or exc}; free some space there or point TMPDIR at another "
                    "directory") from None
