import pytest


@pytest.fixture(params=["interp"])
def target(request):
    """The target every language test runs on; backends extend the list when they can launch."""
    return request.param
