"""The PyTorch context: ``torch.func`` transforms, optionally ``torch.compile``.

One module a concept: :mod:`~simdiff.backends.torch.ops` (the ``ops``
namespace), :mod:`~simdiff.backends.torch.linalg` (its solves),
:mod:`~simdiff.backends.torch.leaves` (structured points split and joined),
:mod:`~simdiff.backends.torch.transforms` (grad, vjp, jacfwd by plain autograd
where that applies), :mod:`~simdiff.backends.torch.compile` (torch.compile and
compiled parts), :mod:`~simdiff.backends.torch.traced` (graphs called without
Dynamo), :mod:`~simdiff.backends.torch.leaks` (the leak guard, with its
dispatch-level watch in :mod:`~simdiff.backends.torch.dispatch` and its
per-thread state in :mod:`~simdiff.backends.torch.leak_state`) and
:mod:`~simdiff.backends.torch.backend` (:class:`TorchBackend`).
"""

from simdiff.backends.torch.backend import TorchBackend as TorchBackend
from simdiff.backends.torch.compile import INDUCTOR_MIN_CHUNK as INDUCTOR_MIN_CHUNK
from simdiff.backends.torch.compile import _inductor_options as _inductor_options
from simdiff.backends.torch.compile import _numpy_guards_dropped as _numpy_guards_dropped
from simdiff.backends.torch.linalg import solve as solve
from simdiff.backends.torch.ops import TorchOps as TorchOps
from simdiff.backends.torch.ops import torch_dtype as torch_dtype
from simdiff.backends.torch.transforms import _autograd_applies as _autograd_applies

__all__ = ["INDUCTOR_MIN_CHUNK", "TorchBackend", "TorchOps", "solve", "torch_dtype"]
