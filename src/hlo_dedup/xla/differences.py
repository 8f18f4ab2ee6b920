"""How two runs' outputs differ, in words: the first differing element, how many differ, by how much."""

from __future__ import annotations

from typing import Any

__all__ = ["describe_difference"]


def _elementwise_mismatch(x: Any, y: Any) -> Any:
    """Boolean array: where the two arrays differ bitwise (x, y of equal shape and dtype)."""
    import numpy as np

    if x.size == 0:
        return np.zeros(x.shape, bool)
    xb = np.ascontiguousarray(x).reshape(-1).view(np.uint8).reshape(x.size, -1)
    yb = np.ascontiguousarray(y).reshape(-1).view(np.uint8).reshape(y.size, -1)
    return np.any(xb != yb, axis=1).reshape(x.shape)


_HLO_TYPES = {
    "bool": "pred", "int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "uint8": "u8",
    "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16", "float32": "f32",
    "float64": "f64", "bfloat16": "bf16", "complex64": "c64", "complex128": "c128", "int4": "s4",
    "uint4": "u4", "int2": "s2", "uint2": "u2",
}


def _scalar(value: Any) -> str:
    try:
        return repr(value.item())
    except (AttributeError, TypeError, ValueError):
        return str(value)


def describe_difference(x: Any, y: Any, index: int, count: int, per_device: bool, comparison: Any) -> tuple[str, int]:
    """(one line, elements that differ) for output `index` of `count`, `x` against `y`;
    `comparison` is `oracle.compare_results`'s verdict on them."""
    import numpy as np

    dims = ",".join(str(d) for d in (x.shape[1:] if per_device else x.shape))
    what = f"output {index} of {count} ({_HLO_TYPES.get(x.dtype.name, x.dtype.name)}[{dims}]"
    what += ", per device)" if per_device else ")"
    if x.shape != y.shape or x.dtype != y.dtype:
        return f"{what}: {comparison.message}", 0
    mismatch = _elementwise_mismatch(x, y)
    n = int(mismatch.sum())
    first = tuple(int(i) for i in np.argwhere(mismatch)[0])
    where = f"device {first[0]} index {list(first[1:])}" if per_device else f"index {list(first)}"
    parts = [f"{what} differs in {n} of {x.size} elements; first at {where}: "
             f"{_scalar(x[first])} vs {_scalar(y[first])}"]
    try:
        with np.errstate(all="ignore"):
            wide = np.complex128 if x.dtype.kind == "c" else np.float64
            nan_only = int(np.sum(np.isnan(x.astype(wide)) != np.isnan(y.astype(wide))))
    except (TypeError, ValueError):
        nan_only = 0
    if nan_only:
        parts.append(f"{nan_only} NaN in one and not the other")
    parts.append(f"max abs diff {comparison.max_abs_diff:.6g}, max rel diff {comparison.max_rel_diff:.6g}")
    return "; ".join(parts), n
