"""The harness's own tests run it on the interpreter at tiny sizes (timings are never
asserted): on a machine with a GPU the default target would be that GPU, so the target is
the interpreter here."""

import pytest


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    monkeypatch.setenv("POLYTILE_TARGET", "interp")
