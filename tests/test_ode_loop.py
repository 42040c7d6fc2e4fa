"""The shared step loop: derivative strategies (adjoints), bounded memory, budgets, stability."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import simdiff
from simdiff.backends.jax import STEP_LOOP_OPTIONS
from simdiff.errors import (
    InputError,
    SimdiffError,
    SolverError,
    StabilityError,
    UnsupportedError,
)
from simdiff.ode import (
    CheckpointAdjoint,
    DirectAdjoint,
    Dopri5,
    FixedStep,
    ForwardAdjoint,
    ODEProblem,
    Rodas3,
)
from simdiff.ode.adjoint import DECISION, blocked_loop


def _oscillator(t, y, p, ops):
    return ops.stack([y[1], -p[0] * y[0] - p[1] * y[1]])


#: the adjoints' comparisons are to rounding, whatever the tolerance: a loose one takes fewer
#: steps (58 against 195 at rtol 1e-10), so fewer for torch's eager loop to run
LOOSE = Dopri5(rtol=1e-7, atol=1e-9, max_steps=500)


def _problem(adjoint=None, solver=None, **kw):
    return ODEProblem(
        _oscillator, [1.0, 0.0], (0.0, 3.0), [4.0, 0.3], save_at=np.linspace(0.5, 3.0, 6),
        observable=lambda ys, ops: ops.sum(ys[:, 0] ** 2) + ys[-1, 1],
        solver=solver or Dopri5(rtol=1e-10, atol=1e-12, max_steps=500), adjoint=adjoint, **kw,
    )  # fmt: skip


@pytest.fixture(scope="module")
def default_problem() -> ODEProblem:
    """One problem with the default adjoint for the module (at the loose tolerance): its
    compiled derivatives (in its cache) are shared by the tests that compare against it."""
    return _problem(solver=LOOSE)


@pytest.fixture(scope="module")
def forward_problem() -> ODEProblem:
    return _problem(ForwardAdjoint(), solver=LOOSE)


@pytest.mark.parametrize("group", [1, 4, 16])
@pytest.mark.parametrize("block", [1, 7, 16, 64])
def test_blocked_loop_stops_where_the_while_loop_stops(block: int, group: int) -> None:
    """Also with groups of masked steps, and a body that does not stop by itself."""
    ops = simdiff.get_ops("jax")

    def cond(c):
        return (c[1] < 37.0) & (c[0] < 50)

    def body(c):
        return c[0] + 1, c[1] + 1.5

    want = ops.while_loop(cond, body, (0, ops.asarray(0.0)), 50)
    got = blocked_loop(cond, body, (0, ops.asarray(0.0)), 50, block, ops, remat=True, group=group)
    assert int(got[0]) == int(want[0]) == 25
    assert float(got[1]) == float(want[1]) == 37.5


@pytest.mark.parametrize("group", [1, 4])
@pytest.mark.parametrize("tag", [DECISION, "another name"])
def test_blocked_loop_replays_the_decisions_of_the_forward(tag: str, group: int) -> None:
    """A recomputed block reuses the forward's values tagged DECISION instead of its own.

    The step ``h`` comes from a callback that returns another value on every call, as a
    recomputation compiled apart from the forward may round an error estimate differently.
    Tagged DECISION, the gradient is that of the forward's steps (to rounding); under
    another name the recomputation draws new steps, and the gradient is theirs (off by
    ~1e-3 relative): the test could fail.
    """
    ops = simdiff.get_ops("jax")
    drawn: list[float] = []

    def draw(i):
        drawn.append(0.1 * (1.0 + 1e-3 * len(drawn)))
        return np.float64(drawn[-1])

    def run(x):
        def body(c):
            i, y = c
            h = jax.pure_callback(draw, jax.ShapeDtypeStruct((), jnp.float64), i)
            h = ops.checkpoint_name(h, tag)
            return i + 1.0, y * (1.0 - h * x)  # explicit Euler for y' = -x y

        carry = (ops.asarray(0.0), ops.asarray(1.0))
        return blocked_loop(lambda c: c[0] < 10.0, body, carry, 12, 4, ops, remat=True,
                            group=group)[1]  # fmt: skip

    x = 0.5
    g = float(jax.grad(run)(x))
    h = np.array(drawn[:10])  # the forward's ten steps (a group draws past the end, masked)
    want = np.prod(1.0 - h * x) * np.sum(-h / (1.0 - h * x))
    # ten products of numbers near 1: rounding ~10 eps
    if tag == DECISION:
        assert g == pytest.approx(want, rel=1e-14)
    else:
        assert abs(g / want - 1.0) > 1e-4


@pytest.mark.parametrize("adjoint", ["direct", "checkpoint-block5", "checkpoint-stores", "forward"])
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_adjoints_give_the_same_derivatives(
    backend: str, adjoint: str, default_problem: ODEProblem, forward_problem: ODEProblem
) -> None:
    """Every strategy differentiates the same discrete solver: equal to rounding.

    One strategy per test (each compiles its own Hessian), so the workers share them."""
    ref = default_problem
    x = ref.x0
    g = simdiff.grad(ref, backend=backend)
    H = simdiff.hessian(ref, backend=backend)  # shared through the module's problem cache
    if adjoint == "forward":
        fwd = forward_problem
        v = np.array([0.7, -1.3])
        np.testing.assert_allclose(simdiff.jvp(fwd, v, x, backend=backend), g @ v, rtol=1e-12)
        Hf = simdiff.hessian(fwd, backend=backend, method="fwd-fwd")
        np.testing.assert_allclose(Hf, H, rtol=1e-10, atol=1e-11)
        return
    strategy = {
        "direct": DirectAdjoint(),
        "checkpoint-block5": CheckpointAdjoint(block=5),
        # the stages' intermediates stored, not recomputed
        "checkpoint-stores": CheckpointAdjoint(remat_rhs=False),
    }[adjoint]
    p = _problem(strategy, solver=LOOSE)
    np.testing.assert_allclose(simdiff.grad(p, backend=backend), g, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(simdiff.hessian(p, backend=backend), H, rtol=1e-11, atol=1e-12)


def test_backends_agree_and_match_finite_differences() -> None:
    p = _problem()  # rtol 1e-10: differences of the values are accurate to rtol / h = 1e-5
    gj = simdiff.grad(p, backend="jax")
    gt = simdiff.grad(p, backend="torch")
    np.testing.assert_allclose(gj, gt, rtol=1e-10, atol=1e-12)
    h = 1e-5
    fd = [(p.evaluate(p.x0 + h * e) - p.evaluate(p.x0 - h * e)) / (2 * h) for e in np.eye(2)]
    np.testing.assert_allclose(gj, fd, rtol=1e-6)


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_forward_adjoint_refuses_reverse_mode_naming_the_alternatives(
    backend: str, default_problem: ODEProblem, forward_problem: ODEProblem
) -> None:
    """Not JAX's raw ValueError: the same UnsupportedError on both backends."""
    p = forward_problem
    v = np.array([0.7, -1.3])
    want = r"ForwardAdjoint.*forward sensitivities only.*CheckpointAdjoint.*DirectAdjoint"
    for call in (lambda: simdiff.grad(p, backend=backend),
                 lambda: simdiff.vjp(p, np.ones(()), backend=backend),
                 lambda: simdiff.hessian(p, backend=backend),
                 lambda: simdiff.hvp(p, v, backend=backend)):  # fmt: skip
        with pytest.raises(UnsupportedError, match=want):
            call()
    # forward mode still works, batched too, and matches the default adjoint's gradient
    g = simdiff.grad(default_problem, backend=backend)
    np.testing.assert_allclose(simdiff.jvp(p, v, backend=backend), g @ v, rtol=1e-12)
    X = np.stack([p.x0, 1.1 * p.x0])
    J = simdiff.jacobian(p, X, backend=backend, mode="fwd")
    np.testing.assert_allclose(J[0], g, rtol=1e-12)


def test_vmapped_gradients_follow_each_lane(default_problem: ODEProblem) -> None:
    p = default_problem
    X = np.stack([p.x0, p.x0 * 1.5, p.x0 * 0.5])
    G = simdiff.grad(p, X, backend="torch")
    for row, x in zip(G, X, strict=True):
        np.testing.assert_allclose(row, simdiff.grad(p, x, backend="jax"), rtol=1e-10)


@pytest.mark.parametrize(
    "solver",
    [
        # loose tolerances: half the steps of tight ones, with as many rejected steps (4, 4, 11)
        LOOSE,
        Dopri5(rtol=1e-7, atol=1e-9, max_steps=500, h0=0.01),
        Rodas3(rtol=1e-5, atol=1e-8, max_steps=500),
        FixedStep(n_steps=60),
    ],
    ids=["dopri5", "dopri5-h0", "rodas3", "rk4"],
)
def test_eager_loop_matches_the_traced_loop(solver, default_problem: ODEProblem) -> None:
    """torch runs the controller on concrete values and branches in Python; under vmap
    (no concrete values) it runs the traced loop with ``where``.  Same steps as JAX,
    same numbers, same derivatives.  (Dopri5 at the loose tolerance is the module's
    problem, whose compiled JAX gradient the adjoint tests share.)"""
    p = default_problem if solver is LOOSE else _problem(solver=solver)
    X = np.stack([p.x0, p.x0])
    g_eager = simdiff.grad(p, backend="torch")
    G_traced = simdiff.grad(p, X, backend="torch")
    np.testing.assert_allclose(G_traced[0], g_eager, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(g_eager, simdiff.grad(p, backend="jax"), rtol=1e-10, atol=1e-12)
    it, ij = p.solve_info(p.x0, backend="torch"), p.solve_info(p.x0, backend="jax")
    assert (it["n_accepted"], it["n_rejected"]) == (ij["n_accepted"], ij["n_rejected"])
    assert it["status"] == 0
    assert it["n_rejected"] > 0 or isinstance(solver, FixedStep)  # the rejection branch runs


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_checkpoint_budget_too_small_names_both_numbers(backend: str) -> None:
    p = _problem(CheckpointAdjoint(block=10, checkpoints=20))
    with pytest.raises(InputError, match=r"checkpoints=20 .*block=10 .*200 .*max_steps=500"):
        simdiff.grad(p, backend=backend)
    with pytest.raises(InputError, match="block must be a positive integer"):
        CheckpointAdjoint(block=0)
    with pytest.raises(InputError, match="remat_rhs must be True or False"):
        CheckpointAdjoint(remat_rhs=1)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="remat_events must be True or False"):
        CheckpointAdjoint(remat_events=1)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="group must be a positive integer"):
        CheckpointAdjoint(group=0)
    with pytest.raises(InputError, match="adjoint must be"):
        _problem("recursive")


def test_exhausted_budget_is_still_a_solver_error(default_problem: ODEProblem) -> None:
    """At a stiff point (spring constant 4e4: |lambda| = 200) the module's problem needs more than
    its 500 steps; its compiled JAX gradient, which the other tests use at x0, raises there."""
    p = default_problem
    x = np.array([4e4, 0.3])
    with pytest.raises(SolverError, match=r"max_steps=500 exhausted at t=.*rodas3"):
        p.evaluate(x)
    with pytest.raises(SimdiffError, match="max_steps=500 exhausted"):
        simdiff.grad(p, x, backend="jax")


def test_reverse_memory_grows_like_sqrt_max_steps() -> None:
    """XLA's peak temporary memory of the compiled gradient: states ~sqrt(N), decisions ~N.

    The states are stored at block boundaries only; each step of ``max_steps`` stores
    its decisions (the step tried, 8 bytes, and its accept flag), which the recomputed
    block replays (blocked_loop).
    """

    def peak(max_steps: int, adjoint) -> int:
        p = _problem(adjoint, solver=Dopri5(rtol=1e-8, atol=1e-10, max_steps=max_steps))
        ops = simdiff.get_ops("jax")
        # compiled as simdiff compiles an ODE's derivatives (Problem.step_loop)
        grad = jax.jit(jax.grad(lambda x: p.fn(x, ops)), compiler_options=STEP_LOOP_OPTIONS)
        return grad.lower(jnp.asarray(p.x0)).compile().memory_analysis().temp_size_in_bytes

    small, large = peak(400, None), peak(40_000, None)
    # measured 12 bytes per step (9 of decisions); a step's state and stages: ~120 (direct)
    assert (large - small) / (40_000 - 400) < 16
    direct = peak(40_000, DirectAdjoint())
    assert direct > 5 * large
    # Rematerialised right-hand sides: a recomputed block stores each stage's
    # input, not the intermediates of every right-hand-side evaluation.
    # (``large`` is the default adjoint, CheckpointAdjoint(remat_rhs=True).)
    assert CheckpointAdjoint() == CheckpointAdjoint(remat_rhs=True)
    assert large < peak(40_000, CheckpointAdjoint(remat_rhs=False))


def test_fixed_step_beyond_stability_limit_raises() -> None:
    def decay(t, y, p, ops):
        return -p[0] * y

    with pytest.raises(
        StabilityError, match=r"dt=0\.05 .*rk4.*\|lambda_max\| = 100 .*n_steps >= 36"
    ):
        ODEProblem(decay, [1.0], (0.0, 1.0), [100.0], solver=FixedStep(n_steps=20))
    p = ODEProblem(decay, [1.0], (0.0, 1.0), [100.0], solver=FixedStep(n_steps=40),
                   observable=lambda ys, ops: ys[-1, 0])  # fmt: skip
    r = 1.0 - 2.5 + 2.5**2 / 2 - 2.5**3 / 6 + 2.5**4 / 24  # RK4 amplification at h lambda = -2.5
    assert p.evaluate(p.x0) == pytest.approx(r**40, rel=1e-12)


def test_rodas3_jacobian_by_ops_and_numpy_reference_agree() -> None:
    p = _problem(solver=Rodas3(rtol=1e-6, atol=1e-9, max_steps=2000))
    want = p.evaluate(p.x0)
    got = simdiff.Derivatives(p, backend="jax").value()
    assert float(got) == pytest.approx(want, rel=1e-7)


def test_group_default_is_smaller_where_steps_locate_events() -> None:
    # the steps of a loop that locates events are heavier: fewer run past the end
    assert CheckpointAdjoint().group_size() == 16
    assert CheckpointAdjoint().group_size(events=True) == 4
    assert CheckpointAdjoint(group=8).group_size(events=True) == 8


@pytest.mark.parametrize(
    ("solver", "adjoint"),
    [
        ("dopri5", None),
        ("rodas5p", None),
        ("dopri5", DirectAdjoint()),
        ("rodas5p", ForwardAdjoint()),
    ],
)
def test_the_stages_of_a_step_share_one_trace_of_the_rhs_on_jax(solver, adjoint) -> None:
    """``ops.traced_once``: a Hessian through Dopri5 (7 stages a step) or Rodas5P (8, and
    the Jacobian), or nested JVPs under the forward adjoint, run the right-hand side's
    Python once per argument signature, not once per stage; the second derivative is
    still y(1) = exp(-p)'s."""
    traced = []

    def rhs(t, y, p, ops):
        traced.append(isinstance(y, jax.core.Tracer))
        return -p[0] * y

    kw = {} if adjoint is None else {"adjoint": adjoint}
    p = ODEProblem(rhs, [1.0], (0.0, 1.0), [0.5], save_at=[1.0], solver=solver,
                   observable=lambda ys, ops: ops.sum(ys), rtol=1e-10, atol=1e-12, **kw)  # fmt: skip
    d = simdiff.Derivatives(p, "jax")
    d.value()  # the first call's checks and the value's own trace, before counting
    traced.clear()
    if adjoint is not None and adjoint.name == "forward":  # forward mode only: nested JVPs
        second = d.derivative(2, np.ones(1), method="nested")
    else:
        second = d.hessian()
    assert 0 < sum(traced) <= 4, traced  # the one trace of the second derivative
    assert np.ravel(second)[0] == pytest.approx(np.exp(-0.5), rel=1e-8)  # y(1) = exp(-p)
