"""What a run did and every way it is shown: the result model and its renderers.

`model` holds the plain data a run produces (per module, per input, the whole run); each
aggregate output is one renderer from a `RunReport` to text: `json` (`--report`), `dot`
(`--dot`), `html` (`--html`) and `summary` (stderr).

Only the summary is part of every run; the JSON, drawing and page renderers load on first
use (`__getattr__`), so a plain run pays nothing at start-up for outputs it does not write.
"""

from .model import (
    EXIT_INPUT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PASS_FAILED,
    BatchInfo,
    InputResult,
    ModuleRun,
    RunReport,
    module_totals,
)
from .summary import input_summary, render_summary
from .units import human_bytes, human_seconds

__all__ = [
    "EXIT_INPUT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PASS_FAILED",
    "IMAGE_FORMATS",
    "SCHEMA_VERSION",
    "BatchInfo",
    "GraphvizError",
    "InputResult",
    "ModuleRun",
    "RunReport",
    "graphviz_missing",
    "human_bytes",
    "human_seconds",
    "image_format_for",
    "input_summary",
    "load_schema",
    "module_totals",
    "render_dot",
    "render_html",
    "render_image",
    "render_json",
    "render_summary",
    "report_json",
]

_JSON = frozenset({"SCHEMA_VERSION", "load_schema", "render_json", "report_json"})
_DRAWING = frozenset({"IMAGE_FORMATS", "GraphvizError", "graphviz_missing", "image_format_for", "render_dot",
                      "render_image"})


def __getattr__(name: str) -> object:
    if name in _JSON:
        from . import json

        return getattr(json, name)
    if name in _DRAWING:
        from . import dot

        return getattr(dot, name)
    if name == "render_html":
        from .html import render_html

        return render_html
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
