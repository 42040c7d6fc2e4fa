"""PDE simulators: grids, stencils, spectral derivatives, ETDRK4 and Problem builders.

Every derivative of the core API (grad, hessian, hvp, ...) applies to the
problems built here, with respect to the initial field or to the physical
parameters, on JAX and on PyTorch.
"""

from simdiff.errors import StabilityError as StabilityError
from simdiff.ode.stability import check_explicit_step as check_explicit_step
from simdiff.ode.stability import real_stability_interval as real_stability_interval
from simdiff.pde.equations import burgers as burgers
from simdiff.pde.equations import burgers_equation as burgers_equation
from simdiff.pde.equations import diffusion as diffusion
from simdiff.pde.equations import diffusion_equation as diffusion_equation
from simdiff.pde.equations import fisher_kpp as fisher_kpp
from simdiff.pde.equations import fisher_kpp_equation as fisher_kpp_equation
from simdiff.pde.equations import gray_scott as gray_scott
from simdiff.pde.equations import gray_scott_equation as gray_scott_equation
from simdiff.pde.equations import kuramoto_sivashinsky as kuramoto_sivashinsky
from simdiff.pde.equations import kuramoto_sivashinsky_equation as kuramoto_sivashinsky_equation
from simdiff.pde.etdrk import etdrk4_coefficients as etdrk4_coefficients
from simdiff.pde.etdrk import etdrk4_integrate as etdrk4_integrate
from simdiff.pde.etdrk import etdrk4_step as etdrk4_step
from simdiff.pde.grid import BOUNDARIES as BOUNDARIES
from simdiff.pde.grid import Grid as Grid
from simdiff.pde.marching import march as march
from simdiff.pde.problem import METHODS as METHODS
from simdiff.pde.problem import STEPPERS as STEPPERS
from simdiff.pde.problem import Discretization as Discretization
from simdiff.pde.problem import Equation as Equation
from simdiff.pde.problem import pde_problem as pde_problem
from simdiff.pde.problem import solve as solve
from simdiff.pde.spectral import as_complex as as_complex
from simdiff.pde.spectral import from_fourier as from_fourier
from simdiff.pde.spectral import laplacian_symbol as laplacian_symbol
from simdiff.pde.spectral import spectral_derivative as spectral_derivative
from simdiff.pde.spectral import spectral_laplacian as spectral_laplacian
from simdiff.pde.spectral import spectral_multiplier as spectral_multiplier
from simdiff.pde.spectral import to_fourier as to_fourier
from simdiff.pde.stencils import ORDERS as ORDERS
from simdiff.pde.stencils import central_stencil as central_stencil
from simdiff.pde.stencils import fd_derivative as fd_derivative
from simdiff.pde.stencils import fd_laplacian as fd_laplacian
from simdiff.pde.stencils import fd_weights as fd_weights
from simdiff.pde.stencils import stencil_spectral_radius as stencil_spectral_radius
