"""Structured points on torch: a flat point split into its leaves, and leaves joined again.

Under eager autograd every operation is a node of the backward pass, so the
leaves are made and put back together in as few operations as their shapes
allow (one ``unbind`` or ``split``; a concatenation of all the leaves of one
point, in order, is that point again, a view).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

__all__ = ["_adjacent_views", "_join_plan", "_split_leaves", "_split_rows"]


@functools.lru_cache(maxsize=256)
def _split_plan(
    bounds: tuple[tuple[int, int], ...], shapes: tuple[tuple[int, ...], ...]
) -> tuple[str, Any, Any]:
    """How :func:`_split_leaves` splits leaves of ``shapes`` (made once per structure):
    ``("scalars", None, None)``, ``("rows", trailing shape, rows per leaf)`` or ``("split",
    sizes, None)``."""
    if all(s == () for s in shapes):
        return "scalars", None, None
    trail = tuple(shapes[0][1:])
    if all(len(s) >= 2 and tuple(s[1:]) == trail for s in shapes):
        return "rows", trail, [s[0] for s in shapes]
    return "split", [b - a for a, b in bounds], None


@functools.lru_cache(maxsize=256)
def _join_plan(shapes: tuple[torch.Size, ...], k: int) -> str:
    """How :meth:`TorchBackend.join` joins leaves of ``shapes`` with ``k`` leading axes (made
    once per tuple of shapes): ``"stack"`` (every leaf a scalar of the leading axes),
    ``"rows"`` (unbatched leaves of one trailing shape: one ``cat`` along the first axis and
    a view) or ``"cat"`` (the leaves as vectors, concatenated)."""
    if all(len(s) == k for s in shapes):
        return "stack"
    if not k:
        trail = shapes[0][1:]
        if trail and all(len(s) >= 2 and s[1:] == trail for s in shapes):
            return "rows"
    return "cat"


def _split_leaves(
    flat: torch.Tensor, bounds: Any, shapes: Any, mark: bool = False
) -> list[torch.Tensor]:
    """The leaves of ``flat`` (``(*lead, n)``), each ``(*lead, *shape)``, as views in one or
    two recorded operations instead of a slice (and a reshape) per leaf: one ``unbind`` for
    scalar leaves; one reshape and one ``split`` along the first axis for leaves of one
    trailing shape (``{"A": (26, 3), "B": (12, 3)}``); else one ``split`` and a reshape per
    leaf that is not a vector.  Under eager autograd every operation is a node of the
    backward pass (a slice's backward fills a zero vector of length ``n``), so fewer is
    cheaper; ``torch.func`` transforms batch each alike.

    ``mark`` (inside a problem's function): leaves of one trailing shape split from one
    point are marked with the reshaped point they were split from (:data:`_ROWS`), so that
    :meth:`TorchOps.concat` of all of them in order returns that tensor, the same values,
    with no operation at all (what a function of per-species positions does first)."""
    kind, a, b = _split_plan(tuple(bounds), tuple(shapes))
    if kind == "scalars":
        return list(torch.unbind(flat, -1))
    lead = flat.shape[:-1]  # a torch.Size: a tuple
    if kind == "rows":
        whole = flat.reshape(*lead, -1, *a)
        leaves = list(torch.split_with_sizes(whole, b, dim=len(lead)))
        # one point (no leading axes) outside Dynamo (no tensor attributes there): marked
        if mark and not lead and not torch.compiler.is_compiling():
            k = len(leaves)
            for i, leaf in enumerate(leaves):
                setattr(leaf, _ROWS, (whole, i, k))
        return leaves
    chunks = torch.split_with_sizes(flat, a, dim=-1)
    return [c if len(s) == 1 else c.squeeze(-1) if s == () else c.reshape(*lead, *s)
            for c, s in zip(chunks, shapes, strict=True)]  # fmt: skip


#: The attribute :func:`_split_leaves` sets on leaves of one trailing shape:
#: ``(whole, i, k)``, the reshaped point they were split from, the leaf's position and the
#: number of leaves (no reference back to the leaves: no cycle keeps a graph alive).
_ROWS = "_simdiff_rows"


def _split_rows(arrays: list[Any]) -> torch.Tensor | None:
    """The point the leaves ``arrays`` were split from (:func:`_split_leaves`) where they
    are all of its leaves, in order: what their concatenation along the first axis
    equals; else None."""
    tag = getattr(arrays[0], _ROWS, None)
    if tag is None or tag[2] != len(arrays):
        return None
    whole = tag[0]
    for i, a in enumerate(arrays):
        t = getattr(a, _ROWS, None)
        if t is None or t[0] is not whole or t[1] != i:
            return None
    return whole  # type: ignore[no-any-return]


def _adjacent_views(arrays: list[Any]) -> torch.Tensor | None:
    """What ``torch.cat(arrays)`` (along the first axis) equals, as one view of the arrays'
    common base, where each is a contiguous view of that (contiguous) tensor of the same
    trailing shape and they lie one after another in its memory; else None.

    The leaves a structured problem's function receives are such views of the flat point
    (:func:`_split_leaves`); a function that concatenates them again (per-species
    positions into one ``(N, 3)`` array) then gets the point itself, reshaped: no copy,
    and under eager autograd one view node instead of a concatenation and a split in the
    backward pass.  The values are those of the concatenation; like any view it shares
    the point's memory (the ``ops`` functions never write in place).  Not inside
    ``torch.func`` transforms or ``torch.compile`` tracing (their tensors are wrappers):
    ``torch.cat`` there.
    """
    if torch.compiler.is_compiling():  # first: Dynamo cannot trace the functorch query
        return None
    first = arrays[0]
    base = first._base if type(first) is torch.Tensor else None
    if base is None or first.dim() == 0 or torch._C._functorch.is_functorch_wrapped_tensor(first):
        return None
    trail = first.shape[1:]
    start = end = first.storage_offset()
    rows = 0
    for a in arrays:
        if (
            type(a) is not torch.Tensor
            or a._base is not base
            or a.shape[1:] != trail
            or a.storage_offset() != end
            or not a.is_contiguous()
        ):
            return None
        end += a.numel()
        rows += a.shape[0]
    if not base.is_contiguous():
        return None
    offset = base.storage_offset()
    if start == offset and end - start == base.numel():
        return base.view(rows, *trail)  # the whole base: the usual case
    return base.view(-1)[start - offset : end - offset].view(rows, *trail)
