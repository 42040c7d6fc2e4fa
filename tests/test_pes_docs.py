"""The code of docs/pes.md runs, top to bottom, and its claims hold."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "pes.md"


@pytest.mark.slow
def test_pes_tutorial_code_runs():
    text = PAGE.read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)\n```", text, flags=re.S))
    scope: dict = {}
    exec(compile(code, str(PAGE), "exec"), scope)
    assert scope["m"].index == 0
    assert scope["m"].energy == pytest.approx(-44.326801, rel=1e-6)
    assert scope["nm"].n_rigid == 6 and scope["nm"].frequencies.shape == (33,)
    assert scope["phi"].shape == (33, 33, 33)
    assert np.all(np.isfinite(scope["hess"]))
