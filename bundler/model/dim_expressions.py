"""Symbolic dims named by arithmetic on other dims.

Exporters name a dim that is the sum of two others by the sum: optimum's decoders take an
`attention_mask` of `past_sequence_length + sequence_length`, torch.export writes `s0 + 1` or
`2*s1`. Such a dim is not free: sizing it on its own (1, like the others) gives a mask shorter
than the keys, and the graph's Gather over the mask reads out of bounds. Its size follows from
the dims it names."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping

_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}


def _parse(dim: str) -> ast.expr | None:
    try:
        tree = ast.parse(dim, mode="eval").body
    except SyntaxError:
        return None
    return tree if isinstance(tree, ast.BinOp) else None


def expression_size(dim: str, sizes: Mapping[str, int]) -> int | None:
    """The size of `dim` when it is arithmetic (+, -, *, //) on integers and dims `sizes`
    holds; None for a plain name or one that names a dim `sizes` lacks, or a negative result."""
    tree = _parse(dim)
    if tree is None:
        return None

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and node.id in sizes:
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise LookupError(node)

    try:
        size = value(tree)
    except (LookupError, ZeroDivisionError):
        return None
    return size if size >= 0 else None


def implied_by(dim: str, names: set[str]) -> bool:
    """Whether `dim` is arithmetic on dims among `names` (so its size follows from theirs)."""
    return expression_size(dim, dict.fromkeys(names, 1024)) is not None
