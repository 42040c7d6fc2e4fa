"""ODE catalogue with events: a bouncing ball with linear drag (simdiff.ode.Event).

The ball ``x'' = -g - c x'`` falls from height 1 at rest; at each impact
(``x = 0`` downwards) a non-terminal event reverses and scales the velocity,
``v -> -e v``.  The observable is the fourth bounce time, a function of the
restitution ``e`` and the drag coefficient ``c``.  With linear drag each
flight has a closed form through the Lambert W function (the drop from rest
``s = 1 + b + W0(-exp(-1 - b))``, ``b = h c^2 / g``; the flight from the
floor at speed ``w``: ``s = a + W0(-a exp(-a))``, ``a = 1 + w c / g``; the
time is ``s / c``), so the exact value, gradient and Hessian come from
mpmath at 50 digits (its ``lambertw`` and ``diff``), independent of the
solver and of the event machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simdiff import CheckOptions
from simdiff.ode import Dopri5, Event, ODEProblem

if TYPE_CHECKING:
    import mpmath as mp

BALL_G = 9.81
BALL_H0 = 1.0
BALL_PARAMS = np.array([0.8, 0.3])  # restitution e, drag c
BALL_BOUNCES = 4
BALL_T_END = 2.17  # between the 4th bounce (2.019) and the 5th (about 2.32)
_DPS = 50


def ball_rhs(t, y, p, ops):
    """Height and velocity under gravity and linear drag; p = (e, c)."""
    return ops.stack([y[1], -BALL_G - p[1] * y[1]])


def ball_floor(t, y, p, ops):
    """The height: the event is its downward zero crossing."""
    return y[0]


def ball_bounce(t, y, p, ops):
    """The impact: the velocity reversed and scaled by the restitution e."""
    return ops.stack([y[0], -p[0] * y[1]])


def _bounce_time(e: mp.mpf, c: mp.mpf) -> mp.mpf:
    """The ``BALL_BOUNCES``-th bounce time by the Lambert-W flights (mpmath)."""
    import mpmath as mp

    g = mp.mpf(BALL_G)
    b = mp.mpf(BALL_H0) * c**2 / g
    s = 1 + b + mp.lambertw(-mp.exp(-1 - b))
    t = s / c
    speed = g / c * (1 - mp.exp(-s))  # at the first impact
    for _ in range(BALL_BOUNCES - 1):
        w = e * speed
        a = 1 + w * c / g
        s = a + mp.lambertw(-a * mp.exp(-a))
        t = t + s / c
        speed = g / c - (w + g / c) * mp.exp(-s)
    return mp.re(t)


def _exact(orders: list[tuple[int, int]], x: np.ndarray) -> np.ndarray:
    import mpmath as mp  # here, not at import: listing the catalogue stays cheap

    with mp.workdps(_DPS):
        at = (mp.mpf(float(x[0])), mp.mpf(float(x[1])))
        return np.array([float(mp.diff(_bounce_time, at, o)) for o in orders])


def _value(x: np.ndarray) -> float:
    return float(_exact([(0, 0)], x)[0])


def _grad(x: np.ndarray) -> np.ndarray:
    return _exact([(1, 0), (0, 1)], x)


def _hessian(x: np.ndarray) -> np.ndarray:
    return _exact([(2, 0), (1, 1), (1, 1), (0, 2)], x).reshape(2, 2)


def bouncing_ball_drag() -> ODEProblem:
    """The 4th bounce time of a ball with restitution e and linear drag c (Lambert W)."""
    bounce = Event(ball_floor, terminal=False, direction=-1, update=ball_bounce)
    return ODEProblem(
        ball_rhs, np.array([BALL_H0, 0.0]), (0.0, BALL_T_END), BALL_PARAMS.copy(),
        events=[bounce], observable=lambda ys, ops, ev: ev.times[BALL_BOUNCES - 1],
        solver=Dopri5(rtol=1e-10, atol=1e-12, max_steps=400), name="bouncing_ball_drag",
        exact={"value": _value, "grad": _grad, "hessian": _hessian},
        meta={"tags": ("ode", "small", "closed-form", "events"),
              "citation": "flight times with linear drag by the Lambert W function: E. Packel, "
              "D. Yuen, 'Projectile motion with resistance and the Lambert W function', College "
              "Math. J. 35 (2004); R. M. Corless et al., Adv. Comput. Math. 5 (1996) 329 (W)",
              "reference": "closed form (Lambert W; mpmath at 50 digits, derivatives by mp.diff)"},
        # reference_rtol: the discrete solution's global error over four flights, well above
        # the local rtol; fd_step: SciPy's default 0.1 reaches e = 0.6, where the bounces
        # accumulate before T_END (a Zeno point, SolverError); 0.01 keeps four bounces
        check_options=CheckOptions(solver_rtol=1e-10, reference_rtol=1e-7, fd_step=0.01),
    )  # fmt: skip


ENTRIES = {"bouncing_ball_drag": bouncing_ball_drag}
