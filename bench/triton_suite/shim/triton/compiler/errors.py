"""``triton.compiler.errors``."""

from polytile.errors import CompilationError, CompilationError as CompileTimeAssertionFailure  # noqa: F401
from polytile.errors import CompilationError as UnsupportedLanguageConstruct  # noqa: F401
