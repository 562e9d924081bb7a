"""``python -m polytile``: the ``polytile`` command (for environments whose scripts are not on PATH)."""

from polytile.cli import main

raise SystemExit(main())
