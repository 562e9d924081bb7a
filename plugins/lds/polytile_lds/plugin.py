"""Entry point of polytile-lds (group ``polytile.plugins``): the hook implementations.

LDS use and occupancy reach the compile metadata as the artifact ``"lds"`` that
``lds-verify`` records (every JSON artifact is metadata, ``CompileResult.metadata``), so
no ``polytile_compile_metadata`` hook is needed: the artifact is already the metadata.
"""

from __future__ import annotations

from polytile.plugins import hookimpl


@hookimpl
def polytile_register_passes(registry):
    from .passes import LdsFit, LdsVerify

    registry.register(LdsFit)
    registry.register(LdsVerify)


@hookimpl
def polytile_configure_pipeline(pipeline, target, options):
    if target.backend != "amd":
        return
    from .passes import LdsFit, LdsVerify

    pipeline.insert_after("memory/allocate-shared", LdsFit())
    pipeline.insert_after("assemble/link-hsaco", LdsVerify())
