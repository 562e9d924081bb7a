"""The language examples run on the default target and match NumPy."""

import pytest

from tests.examples.loading import load_example


@pytest.mark.parametrize("name", ["histogram", "cumsum", "layer_norm", "persistent_matmul", "flash_attention"])
def test_example_runs(name):
    assert load_example(name).main()
