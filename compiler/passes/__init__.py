"""Kiln's passes: named, recorded rewrites between the loaded model and the code we emit.

Importing this package registers every pass.
"""

from compiler.passes import (  # noqa: F401 (importing registers the passes)
    cleanup,
    combine,
    fold,
    fuse,
    integer,
    layout,
    lower,
    prepare,
    reshape,
)
from compiler.passes.base import CATEGORIES, Pass, UnknownPassError, all_passes, get_pass
from compiler.passes.pipeline import (
    PassConfig,
    Pipeline,
    PipelineError,
    default_pipeline,
    load_pipeline,
    save_pipeline,
)
from compiler.passes.runner import PassRecord, PipelineResult, run_pipeline

__all__ = ["CATEGORIES", "Pass", "PassConfig", "PassRecord", "Pipeline", "PipelineError",
           "PipelineResult", "UnknownPassError", "all_passes", "default_pipeline", "get_pass",
           "load_pipeline", "run_pipeline", "save_pipeline"]
