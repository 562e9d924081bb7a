"""``triton.compiler``: the error names Triton's tests catch."""

from polytile.errors import CompilationError  # noqa: F401

from .. import compile  # noqa: F401
from . import errors  # noqa: F401
