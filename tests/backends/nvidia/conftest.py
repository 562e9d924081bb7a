"""Fixtures shared by the NVIDIA backend's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def ptxas():
    """The ptxas the backend finds; skips the test (visibly) where there is none."""
    from polytile_nvidia import assemble, toolkit

    try:
        return assemble.find_ptxas()
    except toolkit.ToolkitNotFoundError:
        pytest.skip("no ptxas on this machine")
