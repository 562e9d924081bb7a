"""``import polytile.language`` stays light: a kernel module is imported on every launch
from the disk cache, and only tracing a kernel needs the builtins and the dialects."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_importing_the_language_imports_no_builtin_module_and_no_dialect():
    script = textwrap.dedent("""
        import sys
        import polytile.language as pl
        loaded = sorted(m for m in sys.modules if m.startswith(("polytile.language.", "polytile.dialects")))
        print(",".join(loaded))
        pl.cumsum, pl.load  # first use imports them
        print("polytile.language.scan" in sys.modules, "polytile.language.standard" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    first, second = done.stdout.splitlines()
    assert first == "polytile.language.core"
    assert second == "True True"


def test_every_name_of_the_language_resolves():
    import polytile.language as pl

    for name in pl.__all__:
        assert getattr(pl, name) is not None, name
    assert set(pl.__all__) <= set(dir(pl))
