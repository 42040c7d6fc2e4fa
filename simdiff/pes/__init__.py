"""Potential-energy surfaces: pair potentials, clusters, normal modes, minima and saddles.

Build an energy :class:`simdiff.Problem` with :func:`cluster_problem`,
:func:`term_energy` (a sum of terms over pairs, triples, quadruples of atoms)
or :func:`muller_brown`, then use the derivative API (``simdiff.grad``,
``simdiff.hessian``, ``simdiff.hvp``) or the functions here: :func:`forces`,
:func:`normal_modes`, :func:`cubic_force_constants`, :func:`find_minimum`,
:func:`find_saddle`, :func:`stationary_index`.  :class:`NeighbourList` is a
fixed-capacity neighbour list that follows the atoms inside ``jax.jit``.
Many-body potentials (:mod:`simdiff.pes.manybody`): :func:`eam` (analytic, or
funcfl/setfl files) and :func:`stillinger_weber`, as problems
(:func:`manybody_problem`) or through the ASE calculator (``potential=``).
"""

from simdiff.pes.cluster import PairTerm as PairTerm
from simdiff.pes.cluster import cluster_energy as cluster_energy
from simdiff.pes.cluster import cluster_problem as cluster_problem
from simdiff.pes.derivatives import cubic_directions as cubic_directions
from simdiff.pes.derivatives import cubic_force_constants as cubic_force_constants
from simdiff.pes.derivatives import forces as forces
from simdiff.pes.derivatives import quartic_force_constants as quartic_force_constants
from simdiff.pes.geometry import Cell as Cell
from simdiff.pes.geometry import ClusterInfo as ClusterInfo
from simdiff.pes.geometry import check_positions as check_positions
from simdiff.pes.geometry import cluster_info as cluster_info
from simdiff.pes.geometry import minimum_image as minimum_image
from simdiff.pes.geometry import pair_index as pair_index
from simdiff.pes.manybody import EAM as EAM
from simdiff.pes.manybody import StillingerWeber as StillingerWeber
from simdiff.pes.manybody import eam as eam
from simdiff.pes.manybody import eam_hessian as eam_hessian
from simdiff.pes.manybody import manybody_problem as manybody_problem
from simdiff.pes.manybody import stillinger_weber as stillinger_weber
from simdiff.pes.neighbours import NeighbourList as NeighbourList
from simdiff.pes.neighbours import Neighbours as Neighbours
from simdiff.pes.normal_modes import NormalModes as NormalModes
from simdiff.pes.normal_modes import internal_basis as internal_basis
from simdiff.pes.normal_modes import mass_weighted_hessian as mass_weighted_hessian
from simdiff.pes.normal_modes import normal_modes as normal_modes
from simdiff.pes.normal_modes import rigid_body_basis as rigid_body_basis
from simdiff.pes.normal_modes import wavenumber_factor as wavenumber_factor
from simdiff.pes.optimize import MINIMIZE_METHODS as MINIMIZE_METHODS
from simdiff.pes.optimize import StationaryPoint as StationaryPoint
from simdiff.pes.optimize import find_minimum as find_minimum
from simdiff.pes.optimize import find_saddle as find_saddle
from simdiff.pes.optimize import stationary_index as stationary_index
from simdiff.pes.potentials import PairPotential as PairPotential
from simdiff.pes.potentials import SmoothCutoff as SmoothCutoff
from simdiff.pes.potentials import lennard_jones as lennard_jones
from simdiff.pes.potentials import morse as morse
from simdiff.pes.potentials import smooth_cutoff as smooth_cutoff
from simdiff.pes.potentials import switch_c2 as switch_c2
from simdiff.pes.surfaces import MULLER_BROWN_PARAMS as MULLER_BROWN_PARAMS
from simdiff.pes.surfaces import muller_brown as muller_brown
from simdiff.pes.surfaces import muller_brown_energy as muller_brown_energy
from simdiff.pes.terms import TermEnergy as TermEnergy
from simdiff.pes.terms import check_index as check_index
from simdiff.pes.terms import structured_hessian as structured_hessian
from simdiff.pes.terms import term_energy as term_energy
