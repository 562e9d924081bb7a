"""Triton's own language tests against polytile: ``python -m bench.triton_suite``.

Triton's ``python/test/unit/language/test_core.py`` (a Triton checkout's, unmodified)
runs with ``import triton`` answered by :mod:`shim/triton <bench.triton_suite.shim>`:
``triton.language`` *is* ``polytile.language``, ``triton.jit`` is ``polytile.jit``; the
scaffolding the test file imports around the language (``triton._internal_testing``,
``triton.knobs``, ``triton.runtime.driver``) is written for polytile there, and listed
in docs/triton-compat.md.  The same file runs under Triton itself (``--triton``) on the
same machine for the baseline; the report counts, of the tests Triton passes, how many
polytile passes, and groups the rest by cause (:mod:`.groups`).  Tests of Triton's
internals (its IR text, ``.asm``, ``triton.compile``) are counted apart.
"""
