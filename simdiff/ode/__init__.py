"""ODE simulators whose every derivative is available on both backends."""

from .rk import EULER as EULER
from .rk import HEUN as HEUN
from .rk import RK4 as RK4
from .rk import ButcherTableau as ButcherTableau
from .rk import rk_integrate as rk_integrate
from .rk import rk_step as rk_step
