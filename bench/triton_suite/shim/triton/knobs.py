"""``triton.knobs``, as far as Triton's test conftest uses it: scopes that change
nothing (polytile's settings live in ``polytile.config``)."""

from __future__ import annotations

import contextlib


class base_knobs:
    knob_descriptors: dict = {}

    @contextlib.contextmanager
    def scope(self):
        yield self

    def copy(self):
        return self

    def reset(self):
        return self


class _Cache(base_knobs):
    dir = None


class _Runtime(base_knobs):
    interpret = False


cache = _Cache()
runtime = _Runtime()
propagate_env = True
