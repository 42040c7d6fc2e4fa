"""Many-body potentials: the embedded-atom method and Stillinger-Weber, with exact derivatives.

Site potentials (:mod:`simdiff.pes.manybody.sites`): the energy is a sum over
atoms of a function of each atom's displacements to its neighbours, on a
per-atom neighbour table that follows the atoms in any cell.  Build a
:class:`simdiff.Problem` with :func:`manybody_problem`, or evaluate energy,
forces, exact stress, per-atom energies, Hessians and phonons with
:class:`SiteEvaluator` (what :class:`~simdiff.pes.ase_interface.SimdiffCalculator`
runs with ``potential=``).

:func:`~simdiff.pes.manybody.phonons.site_phonons` (in
:mod:`simdiff.pes.manybody.phonons`, which needs ASE) gives exact phonons.
"""

from simdiff.pes.manybody.eam import EAM as EAM
from simdiff.pes.manybody.eam import EAMHessian as EAMHessian
from simdiff.pes.manybody.eam import eam as eam
from simdiff.pes.manybody.eam import eam_hessian as eam_hessian
from simdiff.pes.manybody.sites import SiteEnergy as SiteEnergy
from simdiff.pes.manybody.sites import SiteEvaluator as SiteEvaluator
from simdiff.pes.manybody.sites import StrainedSites as StrainedSites
from simdiff.pes.manybody.sites import manybody_problem as manybody_problem
from simdiff.pes.manybody.sites import species_codes as species_codes
from simdiff.pes.manybody.spline import SplineSet as SplineSet
from simdiff.pes.manybody.spline import UniformSpline as UniformSpline
from simdiff.pes.manybody.stillinger_weber import StillingerWeber as StillingerWeber
from simdiff.pes.manybody.stillinger_weber import stillinger_weber as stillinger_weber
from simdiff.pes.manybody.table import SiteTable as SiteTable
from simdiff.pes.manybody.table import site_table as site_table
from simdiff.pes.manybody.tabulated import EAMTables as EAMTables
from simdiff.pes.manybody.tabulated import read_eam as read_eam
from simdiff.pes.manybody.tabulated import tabulate_eam as tabulate_eam
from simdiff.pes.manybody.tabulated import write_eam as write_eam
