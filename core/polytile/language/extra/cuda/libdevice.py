"""Triton's ``tl.extra.cuda.libdevice``: the functions of :mod:`polytile.language.extra.libdevice`."""

from ..libdevice import *  # noqa: F401,F403
from ..libdevice import __all__  # noqa: F401
