"""Potential-energy surfaces: pair potentials, clusters, normal modes, minima and saddles.

Build an energy :class:`simdiff.Problem` with :func:`cluster_problem`,
:func:`term_energy` (a sum of terms over pairs, triples, quadruples of atoms)
or :func:`muller_brown`, then use the derivative API (``simdiff.grad``,
``simdiff.hessian``, ``simdiff.hvp``) or the functions here: :func:`forces`,
:func:`normal_modes`, :func:`cubic_force_constants`, :func:`find_minimum`,
:func:`find_saddle`, :func:`stationary_index`.  :class:`NeighbourList` is a
fixed-capacity neighbour list that follows the atoms inside ``jax.jit``.
"""

from .cluster import PairTerm as PairTerm
from .cluster import cluster_energy as cluster_energy
from .cluster import cluster_problem as cluster_problem
from .derivatives import cubic_directions as cubic_directions
from .derivatives import cubic_force_constants as cubic_force_constants
from .derivatives import forces as forces
from .derivatives import quartic_force_constants as quartic_force_constants
from .geometry import Cell as Cell
from .geometry import ClusterInfo as ClusterInfo
from .geometry import check_positions as check_positions
from .geometry import cluster_info as cluster_info
from .geometry import minimum_image as minimum_image
from .geometry import pair_index as pair_index
from .neighbours import NeighbourList as NeighbourList
from .neighbours import Neighbours as Neighbours
from .normal_modes import NormalModes as NormalModes
from .normal_modes import internal_basis as internal_basis
from .normal_modes import mass_weighted_hessian as mass_weighted_hessian
from .normal_modes import normal_modes as normal_modes
from .normal_modes import rigid_body_basis as rigid_body_basis
from .normal_modes import wavenumber_factor as wavenumber_factor
from .optimize import MINIMIZE_METHODS as MINIMIZE_METHODS
from .optimize import StationaryPoint as StationaryPoint
from .optimize import find_minimum as find_minimum
from .optimize import find_saddle as find_saddle
from .optimize import stationary_index as stationary_index
from .potentials import PairPotential as PairPotential
from .potentials import SmoothCutoff as SmoothCutoff
from .potentials import lennard_jones as lennard_jones
from .potentials import morse as morse
from .potentials import smooth_cutoff as smooth_cutoff
from .potentials import switch_c2 as switch_c2
from .surfaces import MULLER_BROWN_PARAMS as MULLER_BROWN_PARAMS
from .surfaces import muller_brown as muller_brown
from .surfaces import muller_brown_energy as muller_brown_energy
from .terms import TermEnergy as TermEnergy
from .terms import check_index as check_index
from .terms import structured_hessian as structured_hessian
from .terms import term_energy as term_energy
