"""``python -m polytile.fuzz``: see :mod:`polytile.fuzz.cli` and docs/fuzzing.md."""

import sys

from .cli import main

sys.exit(main())
