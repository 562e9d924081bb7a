"""An example polytile pass plugin (see docs/writing-a-pass-plugin.md)."""

__version__ = "1.2.0"
