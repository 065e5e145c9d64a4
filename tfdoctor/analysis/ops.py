"""Op type families: the one place that says which TensorFlow op types are matrix math.

Trace events of TF ops are named ``"scope/name:OpType"``. The op type of a CPU kernel is often not the
graph op's: oneDNN (``_Mkl*``, ``_MklNative*``) and Grappler's fusions (``_Fused*``) rename them, and new
variants appear with each release (``_MklNativeConv2DBackpropFilterWithBias``, ``_MklFusedBatchMatMulV2``).
So a type is classified by its family, not looked up in a list: the prefixes are stripped and what is left
is matched against the base ops.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

Family = Literal["matmul", "conv", "other"]

#: prefixes of rewritten kernels: oneDNN (``_Mkl``, ``_MklNative``), Grappler fusions (``_Fused``),
#: quantized variants; any combination, in this order
_PREFIX_RE = re.compile(r"^_?(?:Mkl)?(?:Native)?(?:Fused)?(?:Quantized)?")
_MATMUL_RE = re.compile(r"^(?:Batch)?MatMul|^Einsum|^SparseMatMul|^SparseTensorDenseMatMul")
_CONV_RE = re.compile(r"^(?:Conv[123]D|DepthwiseConv2dNative|Conv2DBackprop|Conv3DBackprop)")


def op_type(event_name: str) -> str:
    """``"model/dense/MatMul:_MklFusedMatMul"`` -> ``"_MklFusedMatMul"`` (the part after the last colon)."""
    return event_name.rsplit(":", 1)[-1]


@lru_cache(maxsize=4096)
def op_family(op: str) -> Family:
    """The family of an op type: ``"matmul"`` (MatMul, BatchMatMul, Einsum and their oneDNN/fused forms),
    ``"conv"`` (convolutions, forward and backward, depthwise) or ``"other"``."""
    base = _PREFIX_RE.sub("", op, count=1)
    if _CONV_RE.match(base):
        return "conv"
    if _MATMUL_RE.match(base):
        return "matmul"
    return "other"


def is_matmul_or_conv(op: str) -> bool:
    return op_family(op) != "other"
