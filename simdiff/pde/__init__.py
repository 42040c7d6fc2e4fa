"""PDE simulators: grids, stencils, spectral derivatives, ETDRK4 and Problem builders.

Every derivative of the core API (grad, hessian, hvp, ...) applies to the
problems built here, with respect to the initial field or to the physical
parameters, on JAX and on PyTorch.
"""

from .equations import burgers as burgers
from .equations import burgers_equation as burgers_equation
from .equations import diffusion as diffusion
from .equations import diffusion_equation as diffusion_equation
from .equations import fisher_kpp as fisher_kpp
from .equations import fisher_kpp_equation as fisher_kpp_equation
from .equations import gray_scott as gray_scott
from .equations import gray_scott_equation as gray_scott_equation
from .equations import kuramoto_sivashinsky as kuramoto_sivashinsky
from .equations import kuramoto_sivashinsky_equation as kuramoto_sivashinsky_equation
from .etdrk import etdrk4_coefficients as etdrk4_coefficients
from .etdrk import etdrk4_integrate as etdrk4_integrate
from .etdrk import etdrk4_step as etdrk4_step
from .grid import BOUNDARIES as BOUNDARIES
from .grid import Grid as Grid
from .marching import march as march
from .problem import METHODS as METHODS
from .problem import STEPPERS as STEPPERS
from .problem import Discretization as Discretization
from .problem import Equation as Equation
from .problem import pde_problem as pde_problem
from .problem import solve as solve
from .spectral import as_complex as as_complex
from .spectral import from_fourier as from_fourier
from .spectral import laplacian_symbol as laplacian_symbol
from .spectral import spectral_derivative as spectral_derivative
from .spectral import spectral_laplacian as spectral_laplacian
from .spectral import spectral_multiplier as spectral_multiplier
from .spectral import to_fourier as to_fourier
from .stability import StabilityError as StabilityError
from .stability import check_explicit_step as check_explicit_step
from .stability import real_stability_interval as real_stability_interval
from .stencils import ORDERS as ORDERS
from .stencils import central_stencil as central_stencil
from .stencils import fd_derivative as fd_derivative
from .stencils import fd_laplacian as fd_laplacian
from .stencils import fd_weights as fd_weights
from .stencils import stencil_spectral_radius as stencil_spectral_radius
