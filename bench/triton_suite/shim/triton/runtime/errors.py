"""``triton.runtime.errors``: polytile's interpreter error under Triton's name."""

from polytile.errors import InterpreterError, OutOfResourcesError as OutOfResources  # noqa: F401
