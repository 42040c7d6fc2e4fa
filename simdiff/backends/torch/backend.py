"""The torch backend: ``torch.func`` transforms, optionally ``torch.compile``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.func

from simdiff.backends._backend import Backend
from simdiff.backends._caches import enable_persistent_caches
from simdiff.backends.torch.compile import _forward_levels, _PartCompiler, compile_function
from simdiff.backends.torch.leaks import LeakGuard, guard_message, watching_grad_mode
from simdiff.backends.torch.leaves import _join_plan, _split_leaves
from simdiff.backends.torch.ops import TorchOps, torch_dtype
from simdiff.backends.torch.transforms import _concrete, _grad, _vjp

__all__ = ["TorchBackend"]

enable_persistent_caches("torch")

# torch's messages when a problem leaves the traced computation, and what it did
_LEAK_ERRORS = (
    ("Can't call numpy() on Tensor that requires grad", "a round trip through numpy (x.numpy())"),
    ("doesn't have storage", "a round trip through numpy (np.asarray(x), np.*)"),
    ("calling .item() on a Tensor", "x.item() or float(x[i]) on an array"),
    ("data-dependent control flow", "a Python `if`/`while` on an array value"),
)

#: torch.func's refusals of a construct inside the problem: (fragment of torch's message,
#: what simdiff says)
_REFUSALS = (
    (
        "it must override the setup_context staticmethod",
        "the problem calls a torch.autograd.Function written in the old style (forward(ctx, "
        "...)), which torch.func transforms (Hessians, HVPs, JVPs, batched calls) refuse; it "
        "needs a setup_context staticmethod (torch's 'Extending torch.func with "
        "autograd.Function'), or use a derivative torch computes with plain autograd (grad, vjp)",
    ),
)


class TorchBackend(Backend):
    name = "torch"
    ops_class = TorchOps
    optional_compiler = True
    #: torch.func's double backward beats jvp-of-grad eager on every problem measured
    #: (ishigami, rosenbrock32, lj38; ``validation/benchmarks/bench_torch.py``,
    #: docs/performance.md).
    hvp_method = "rev-rev"
    prefers_batched_calls = False
    #: ``torch.func.grad`` / ``vjp``; at the top level (no transform active, not
    #: compiling) by plain ``torch.autograd``: same numbers, without torch.func's
    #: dispatch per operation (:func:`_grad`, docs/performance.md).
    grad = staticmethod(_grad)
    jvp = staticmethod(torch.func.jvp)
    vjp = staticmethod(_vjp)
    jacfwd = staticmethod(torch.func.jacfwd)
    jacrev = staticmethod(torch.func.jacrev)

    def ops(self, dtype: Any = None, device: Any = None) -> TorchOps:
        return TorchOps(torch.float64 if dtype is None else dtype, device)

    def ops_compiling_parts(self, dtype: Any = None, device: Any = None) -> TorchOps:
        """A context whose eager loops compile their step (:class:`_PartCompiler`)."""
        ops = self.ops(dtype, device)
        ops.compile_part = _PartCompiler(self.compile)
        return ops

    def vmap(self, fn: Callable[..., Any], in_axes: Any = 0) -> Callable[..., Any]:
        return torch.func.vmap(fn, in_dims=in_axes)

    def compile(
        self,
        fn: Callable[..., Any],
        fullgraph: bool = False,
        pointwise_cat: bool = False,
        dynamo: bool = True,
    ) -> Callable[..., Any]:
        """``torch.compile`` for static shapes (simdiff builds one callable per shape).

        :func:`simdiff.backends.torch.compile.compile_function`: ``fullgraph=True``
        makes a graph break an error, ``pointwise_cat=True`` fuses
        concatenations into their consumers, ``dynamo=False`` traces once per
        input signature and calls Inductor's code without Dynamo.
        """
        return compile_function(fn, fullgraph, pointwise_cat, dynamo)

    def warm_up(self) -> None:
        t = torch.tensor([0.5], dtype=torch.float64)
        torch.func.grad(lambda y: torch.sin(y).sum())(t)

    leak_warnings = ("Converting a tensor with requires_grad=True to a scalar",)

    def leak_guard(self, trusted: frozenset[str] = frozenset(), strict: bool = False) -> LeakGuard:
        """``x.item()``, ``x.tolist()``, ``float(x)``, ``int(x)`` raise on a tensor that
        requires grad while it is entered, and the problem's own graph cuts (not those of
        ``trusted`` packages) too (:mod:`simdiff.backends.torch.leaks`)."""
        return LeakGuard(trusted, strict)

    def problem_call(self, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        return watching_grad_mode(fn)

    def refusal_cause(self, exc: BaseException) -> str | None:
        if isinstance(exc, RuntimeError):
            for fragment, cause in _REFUSALS:
                if fragment in str(exc):
                    return cause
        return None

    def leak_cause(self, exc: BaseException) -> str | None:
        guarded = guard_message(exc)
        if guarded is not None:
            return guarded
        if isinstance(exc, UserWarning) and str(exc).startswith(self.leak_warnings):
            return "float(x[i]) or int(...) on an array"
        if isinstance(exc, RuntimeError):
            for fragment, cause in _LEAK_ERRORS:
                if fragment in str(exc):
                    return cause
        return None

    @staticmethod
    def hessian_method(n: int, m: int, compiled: bool = False) -> str:
        """Reverse over reverse, whatever the shape, eager or compiled (measured rule).

        Eager (``python -m validation.benchmarks.bench_torch_hessian``): torch.func's double
        backward beat forward over reverse and forward over forward on every
        catalogue entry measured, scalar and vector-valued (docs/performance.md).
        Compiled (``--compiled``, docs/performance.md): reverse over reverse is
        the only method that compiled on every entry: forward over reverse
        failed in Inductor on every energy that gathers atoms (LJ-7/13/38) and
        elsewhere was faster on some entries and slower on others, which no
        property of the problem predicts before compiling; forward over forward is refused at one
        point (:meth:`compile_refusal`), so the compiled path has no second
        method.
        """
        return "rev-rev"

    @staticmethod
    def compile_refusal(
        kind: str, params: dict[str, Any], scalar: bool, batched: bool = False
    ) -> str | None:
        """Refuse torch.compile where it crashes: two nested forward levels at one point.

        In torch 2.13 (CPU) the compiled code of a ``jvp`` nested in a
        ``jvp`` can end the process with a segmentation fault on its first
        call, which no ``try`` catches (Inductor's code: the same graphs run
        under ``backend="aot_eager"``).  One subprocess per construction
        (``python -m validation.benchmarks.probe_compile_crash``, output in
        docs/results/probe_compile_crash.txt; plain ``torch.compile`` of
        ``torch.func`` code, no simdiff) found:

        * at one point, two or more nested forward levels (``jacfwd(jacfwd
          f)``, ``jvp`` of ``jvp``, ``jacfwd(jacfwd(jacrev f))``, and the
          same vmapped over directions, as the nested derivative sums and the
          biharmonic build them) crashed on scalar *and* vector-valued
          functions (Ishigami, the seed function at order 3, a two-output
          function at order 3), while other functions of the same
          construction compiled or raised a catchable error: which function
          crashes is not predictable from the construction, so each such
          construction at one point is refused;
        * with the point batched (``vmap`` over points, ``batched``: claim
          C5's batched third derivative) no construction crashed: nested
          orders 2 to 4 compiled and ``vmap(jacfwd(jacfwd f))`` raised a
          catchable Dynamo error, which ``compile=True`` reports and
          ``"auto"`` turns into eager;
        * one forward level (``jacfwd(jacrev f)``, HVPs, JVPs) compiled.

        So the rule is on the construction and on whether the point is
        batched, not on the output shape (``scalar`` only counts the levels of
        the order-2 derivative sum, forward over reverse for a scalar).  A
        one-time subprocess probe per construction was the alternative; it
        cannot run the user's own function (closures do not cross processes)
        and a stand-in function does not predict it (above), so it would be
        no more exact than this rule and cost a compile per construction.
        """
        levels = _forward_levels(kind, params, scalar)
        if levels < 2 or batched:
            return None
        return (
            f"torch.compile of {kind} {params} at one point ({levels} nested forward-mode "
            "levels) can crash the process in torch 2.13 (segmentation fault in the generated "
            "code; docs/performance.md); not compiled. Batched points compile."
        )

    def join(self, parts: Any, lead: tuple[int, ...]) -> Any:
        """``torch.stack`` of scalar leaves; ``torch.cat`` of the leaves of one trailing shape
        along their first axis and a view (unbatched: two operations, whatever the number
        of leaves); else ``torch.cat`` of the leaves as vectors (:func:`_join_plan`, kept
        per tuple of shapes)."""
        parts = list(parts)
        k = len(lead)
        how = _join_plan(tuple([p.shape for p in parts]), k)
        if how == "stack":
            return torch.stack(parts, dim=-1)
        if how == "rows":
            return torch.cat(parts).view(-1)
        return torch.cat([p if p.dim() == k + 1 else p.reshape(*lead, -1) for p in parts], dim=-1)

    def split(self, flat: Any, bounds: Any, shapes: Any) -> list[Any]:
        """The leaves of ``flat`` (``(*lead, n)``) in as few operations as
        :func:`_split_leaves` takes."""
        return _split_leaves(flat, bounds, shapes)

    def is_native(self, x: Any) -> bool:
        return isinstance(x, torch.Tensor)

    def concrete_leaves(self, parts: Any, shapes: Any, dtype: Any) -> bool:
        """As :meth:`Backend.concrete_leaves`: plain tensors (not wrapped by a ``torch.func``
        transform, not under torch.compile's tracing) of ``dtype`` and their shapes."""
        want = torch_dtype(dtype)
        if torch.compiler.is_compiling():
            return False
        wrapped = torch._C._functorch.is_functorch_wrapped_tensor
        for p, shape in zip(parts, shapes, strict=True):
            if type(p) is not torch.Tensor or p.dtype is not want or p.shape != shape or wrapped(p):
                return False
        return True

    def from_numpy(self, a: Any, dtype: Any, device: Any = None) -> Any:
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            a = a.copy()  # torch refuses read-only buffers (e.g. numpy views of jax arrays)
        t = torch.as_tensor(a, device=device)
        return t.to(torch_dtype(dtype)) if t.dtype != torch_dtype(dtype) else t

    def to_numpy(self, x: Any) -> Any:
        # force: detach, copy to the host, and materialise lazy conjugate/negative views
        # (ifft of a real tensor) and the ZeroTensors torch.func returns for zero derivatives
        return x.numpy(force=True)

    def dtype_name(self, x: Any) -> str:
        return str(x.dtype).removeprefix("torch.")

    def device_of(self, x: Any) -> Any:
        return x.device

    def concrete(self, x: Any) -> Any:
        return _concrete(x)

    def is_traced(self, x: Any) -> bool:
        """Whether ``x`` is wrapped by a ``torch.func`` transform or traced by torch.compile.

        Such a tensor has no storage to read (``x.numpy()`` fails); under
        ``torch.func.grad``/``jvp`` its values still come by ``concrete``,
        under ``torch.func.vmap`` (and torch.compile's tracing) they do not.
        """
        return isinstance(x, torch.Tensor) and (
            torch._C._functorch.is_functorch_wrapped_tensor(x) or torch.compiler.is_compiling()
        )

    def mutation_count(self, x: Any) -> Any:
        """torch's version counter of ``x`` (bumped by every in-place operation)."""
        return x._version

    def threads(self) -> dict[str, Any]:
        """torch's intra-op and inter-op thread counts."""
        return {"torch": torch.get_num_threads(), "torch_interop": torch.get_num_interop_threads()}

    def intra_op_threads(self) -> int | None:
        """``torch.get_num_threads()``: torch changes it at run time."""
        return torch.get_num_threads()

    def set_threads(self, n: int) -> None:
        """``torch.set_num_threads(n)``."""
        torch.set_num_threads(n)
