"""Entry point of polytile-lds (group ``polytile.plugins``): the hook implementations."""

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


@hookimpl
def polytile_compile_metadata(kernel_name, target, metadata):
    if target.backend != "amd":
        return
    info = metadata.get("amd_code_object")
    if not info:
        return
    from .passes import lds_record

    for key, value in lds_record(target.arch, info).items():
        metadata[f"lds.{key}"] = value
