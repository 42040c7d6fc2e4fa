"""``Problem(trusted_packages=...)``: a third-party package's own deliberate detaches and
no-grad blocks pass the torch leak guard; the problem's own code stays watched.

The package here (``leafpkg``, written to a temporary directory) rescales by a power of
two chosen under ``torch.no_grad()`` and multiplies it back: exact in floating point, so
the derivative with the scale held constant is the true one.  The problem calls it behind
a branch taken away from ``x0`` only.  True derivatives of ``x0 x1 + x1^2`` at ``(2, 3)``:
gradient ``[3, 8]``, Hessian ``[[0, 1], [1, 2]]``.
"""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest
import torch

import simdiff

X0 = np.array([0.5, 2.0])
FAR = np.array([2.0, 3.0])
WANT = {"grad": [3.0, 8.0], "hessian": [[0.0, 1.0], [1.0, 2.0]], "hvp": [0.0, 1.0]}

LEAFPKG = '''
import torch


def rescaled(v):
    """v, computed as (v / s) * s with s a power of two chosen without gradients."""
    with torch.no_grad():
        s = 2.0 ** torch.round(torch.log2(v.abs() + 1.0))
    return (v / s) * s


@torch.no_grad()
def _scale(v):
    return 2.0 ** torch.round(torch.log2(v.abs() + 1.0))


def rescaled_decorated(v):
    s = _scale(v)
    return (v / s) * s.data
'''


@pytest.fixture(scope="module")
def leafpkg(tmp_path_factory):
    root = tmp_path_factory.mktemp("site")
    (root / "leafpkg").mkdir()
    (root / "leafpkg" / "__init__.py").write_text(textwrap.dedent(LEAFPKG))
    sys.path.insert(0, str(root))
    import leafpkg

    yield leafpkg
    sys.path.remove(str(root))
    sys.modules.pop("leafpkg", None)


def _problem(helper, trusted=()):
    def fn(x, ops):
        if float(ops.stop_gradient(x[0])) > 1.0:
            return x[0] * helper(x[1]) + x[1] ** 2
        return x[0] * x[1] + x[1] ** 2

    return simdiff.Problem(fn, x0=X0, backends=("torch",), trusted_packages=trusted)


def _call(d, kind, x):
    if kind == "hvp":
        return d.hvp(np.array([1.0, 0.0]), x)
    return getattr(d, kind)(x)


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("helper", ["rescaled", "rescaled_decorated"])
def test_a_trusted_package_detaches_and_the_derivative_is_right(leafpkg, helper, kind):
    d = simdiff.Derivatives(_problem(getattr(leafpkg, helper), ("leafpkg",)), backend="torch")
    _call(d, kind, X0)
    for _ in range(2):  # and on the next call
        np.testing.assert_allclose(_call(d, kind, FAR), WANT[kind], rtol=1e-14)


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
@pytest.mark.parametrize("helper", ["rescaled", "rescaled_decorated"])
def test_an_untrusted_package_is_watched_like_the_problem(leafpkg, helper, kind):
    d = simdiff.Derivatives(_problem(getattr(leafpkg, helper)), backend="torch")
    _call(d, kind, X0)
    with pytest.raises(simdiff.LeakError, match="cut from the graph"):
        _call(d, kind, FAR)


@pytest.mark.parametrize("kind", ["grad", "hessian", "hvp"])
def test_trusting_a_package_leaves_the_problems_own_cuts_watched(leafpkg, kind):
    d = simdiff.Derivatives(_problem(lambda v: v.detach(), ("leafpkg",)), backend="torch")
    _call(d, kind, X0)
    for _ in range(2):
        with pytest.raises(simdiff.LeakError, match=r"x\.detach\(\)"):
            _call(d, kind, FAR)


def test_item_stays_an_error_in_a_trusted_package(leafpkg):
    scope = {"__name__": "leafpkg.numbers"}
    exec("def number(v):\n    return v * v.item()\n", scope)
    d = simdiff.Derivatives(_problem(scope["number"], ("leafpkg",)), backend="torch")
    d.grad(X0)
    with pytest.raises(simdiff.LeakError, match=r"x\.item\(\)"):
        d.grad(FAR)


def test_the_problems_own_package_cannot_be_trusted():
    def fn(x, ops):
        return ops.sum(x.detach())

    own = fn.__module__.partition(".")[0]
    with pytest.raises(simdiff.OptionError, match=f"names '{own}', the package fn is defined"):
        simdiff.Problem(fn, x0=X0, trusted_packages=(own,))
    with pytest.raises(simdiff.OptionError, match="the package fn is defined"):
        simdiff.Problem.from_torch(lambda x: x.detach().sum(), X0, trusted_packages=(own,))


@pytest.mark.parametrize("bad", ["leafpkg", ("leaf.pkg",), (3,), None])
def test_trusted_packages_must_be_a_tuple_of_names(bad):
    with pytest.raises(simdiff.OptionError, match="trusted_packages must"):
        simdiff.Problem(lambda x, ops: ops.sum(x), x0=X0, trusted_packages=bad)


def test_torchdiffeq_adaptive_solver_with_trust():
    """torchdiffeq's dopri5 writes its output through ``x.data`` inside its own
    autograd.Function: refused untrusted, right when trusted (d/dx of x0 exp(-x1));
    its old-style autograd.Function under torch.func (a Hessian) is an UnsupportedError
    that says so, not torch's RuntimeError."""
    torchdiffeq = pytest.importorskip("torchdiffeq")

    def fn(x, ops):
        t = torch.tensor([0.0, 1.0], dtype=torch.float64)
        ys = torchdiffeq.odeint(
            lambda t, y: -x[1] * y, x[:1] * 1.0, t, method="dopri5", rtol=1e-10, atol=1e-12
        )
        return ops.sum(ys[-1])

    untrusted = simdiff.Problem(fn, x0=X0, backends=("torch",))
    with pytest.raises(simdiff.LeakError, match=r"x\.data"):
        simdiff.Derivatives(untrusted, backend="torch").grad(X0)
    p = simdiff.Problem(fn, x0=X0, backends=("torch",), trusted_packages=("torchdiffeq",))
    d = simdiff.Derivatives(p, backend="torch")
    for x in (X0, np.array([0.7, 1.5])):
        e = np.exp(-x[1])
        np.testing.assert_allclose(d.grad(x), [e, -x[0] * e], rtol=1e-7)  # solver tolerance
    with pytest.raises(simdiff.UnsupportedError, match="setup_context"):
        d.hessian(X0)
