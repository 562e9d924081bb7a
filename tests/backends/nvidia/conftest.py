"""Fixtures shared by the NVIDIA backend's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def ptxas():
    """The ptxas the backend finds; skips the test (visibly) where there is none."""
    from tests.toolchains import ptxas_or_skip

    return ptxas_or_skip()
