"""The user's name for a gathered weight, from what the module carries.

A report that says `param.38` makes the user find the weight themselves. Frameworks leave its
name in the module in two places: the entry parameter's metadata `op_name` (JAX's compiled
modules: `params['layers'][5]['w2']`, the argument's key path) and the parameter's own name
(JAX's lowered text: `params__layers___5___w2__.1`, the same path with `[`, `]` and `'` spelled
`_`). torch-xla's parameters carry neither (`op_name="xla__device_data"`, names `p3.4`), nor do
XLA's own (`param.2`, `Arg_0.1`): those get no name rather than a made-up one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..ir.instruction import HloInstruction

#: op_names that name an op or a framework's bookkeeping, not the user's tensor.
_GENERIC_OP_NAMES = frozenset({"xla__device_data", "HLO_Args", "XLA_Args"})
#: Parameter names that XLA, torch-xla or a converter made up.
_GENERIC_NAME = re.compile(r"(?:param(?:eter)?|arg|operand|input|shard_map)_?\d*|p\d+", re.IGNORECASE)
#: A key path as JAX spells it in a name: a root, then `__key__` for ['key'] and `_3_` for [3].
_MANGLED = re.compile(r"([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*?)"
                      r"((?:__[A-Za-z0-9](?:[A-Za-z0-9_]*?[A-Za-z0-9])?__|_\d+_)+)")
_MANGLED_PART = re.compile(r"__([A-Za-z0-9](?:[A-Za-z0-9_]*?[A-Za-z0-9])?)__|_(\d+)_")
#: A layer index in a path: ['layers'][5], model.layers.5, layers_5 (Flax), blocks/3, h.0 (GPT-2).
_LAYER = re.compile(r"(?:^|[.\['/_])(?:layers?|blocks?|h)(?:'\]\[|\]\[|\.|_|\[|/)(\d+)(?:'?\])?", re.IGNORECASE)


def parameter_name(param: HloInstruction) -> str | None:
    """The user's name of an entry parameter, or None when the module does not carry one."""
    metadata = param.metadata
    op_name = metadata.op_name if metadata is not None else ""
    if op_name and op_name not in _GENERIC_OP_NAMES and "jit(" not in op_name:
        return op_name
    base, _, suffix = param.name.rpartition(".")
    if not base or not suffix.isdigit():
        base = param.name
    if _GENERIC_NAME.fullmatch(base):
        return None
    return _demangled(base)


def _demangled(name: str) -> str:
    """JAX's name for a key path (`p__blocks___0___w_in__`) as the path (`p['blocks'][0]['w_in']`);
    any other name as it is."""
    match = _MANGLED.fullmatch(name)
    if match is None:
        return name
    parts = [f"['{key}']" if key else f"[{index}]" for key, index in _MANGLED_PART.findall(match.group(2))]
    return match.group(1) + "".join(parts)


def layer_of(tensor: str) -> str | None:
    """The layer a tensor's name places it in (`params['layers'][5]`, `model.layers.5`), or None."""
    match = _LAYER.search(tensor)
    return tensor[:match.end()] if match is not None else None
