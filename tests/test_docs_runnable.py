"""Every code block of README.md and docs/ marked runnable runs.

A block is marked by the line ``<!-- runnable -->`` right before its ```python fence (an
HTML comment: invisible where the Markdown is shown).  Each runs in a fresh module, in a
scratch directory, on the interpreter (the default target without a GPU).  Blocks that
need a GPU, a plugin's data or a file of their own stay unmarked, and their documents
test them where they are (tests/ir/test_docs.py, tests/gpu/test_docs.py, ...).
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"^<!-- runnable -->\n```python\n(.*?)^```$", re.S | re.M)


def runnable_blocks() -> list[tuple[str, int, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for index, match in enumerate(MARKED.finditer(path.read_text())):
            found.append((str(path.relative_to(ROOT)), index, match.group(1)))
    return found


BLOCKS = runnable_blocks()


def test_marked_blocks_exist():
    assert len(BLOCKS) >= 2, "no code block in README.md or docs/ is marked <!-- runnable -->"


@pytest.mark.parametrize("where, index, source", BLOCKS, ids=[f"{w}#{i}" for w, i, _ in BLOCKS])
def test_marked_block_runs(where, index, source, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = re.sub(r"\W", "_", where)
    module = types.ModuleType(f"polytile_docs_{name}_{index}")
    module.__file__ = str(tmp_path / "snippet.py")
    # @jit reads a kernel's source from its file: give the block one.
    (tmp_path / "snippet.py").write_text(source)
    sys.modules[module.__name__] = module
    module.__dict__["__name__"] = "__main__"  # a script: what runs under `if __name__ == "__main__":` runs
    try:
        exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[f"polytile_docs_{name}_{index}"]
