"""simdiff.evidence.report: markdown, figures and the claims table from a store run."""

from __future__ import annotations

import base64
import math
import re
from dataclasses import asdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

import problems
import simdiff.evidence.report as report_mod
from simdiff.errors import InputError
from simdiff.evidence._figures import claim_label, claims_figure
from simdiff.evidence._html import render_html
from simdiff.evidence.check.run import check
from simdiff.evidence.compare.run import compare
from simdiff.evidence.report import write_report
from simdiff.store import Store
from validation.claims import decide
from validation.claims._common import part


def _claim(
    cid: str, values: list[list[float]], beside: dict | None = None, details: dict | None = None
) -> dict:
    """A claim decided from synthetic per-process parts, as ``simdiff report`` stores it."""
    parts = []
    for k, vals in enumerate(values, start=1):
        rec = part(
            values=vals,
            beside={name: v[k - 1] for name, v in (beside or {}).items()},
            measured=f"process {k} synthetic",
            threads={"grad jax-jit": 1.02, "grad torch-eager": 0.5},
            details=details,
        )
        rec.update(id=cid, process=k, seconds=1.0)
        parts.append(rec)
    return decide(cid, parts)


def test_report_from_a_store_run(tmp_path: Path) -> None:
    s = Store(tmp_path / "simdiff.h5")
    run = s.start_run("report-quick", {"quick": True})
    p = problems.get("rosenbrock4")
    res = check(p, derivatives=("grad",), backends=("jax",))
    s.put(
        run,
        "rosenbrock4",
        "check",
        "all",
        {
            "passed": res.passed,
            "verdict": res.verdict,
            "n": p.n,
            "entries": [asdict(e) for e in res.entries],
        },
    )
    r = compare(p, ["grad"], ["jax-jit", "torch-eager", "scipy-fd"], repeats=2)
    s.put(run, "rosenbrock4", "compare", "all", r.record())
    s.put(run, "rosenbrock4", "skipped", "torch-compile", {"reason": "left out of --quick"})
    s.put(run, "seed", "skipped", "hessian", {"reason": "<lambda> raised & gave up"})
    c1 = [[9.0, 10.0, 11.0, 9.5], [10.0, 9.0, 10.5, 9.8]]
    compiled = [[0.05, 0.06, 0.05, 0.05], [0.05, 0.05, 0.06, 0.05]]
    s.put(run, "claims", "C1", "claim", _claim("C1", c1, {"torch.compile / JAX": compiled}))
    s.put(run, "claims", "C6", "claim", _claim("C6", [[-2e-6, 3e-6, 1e-6], [2e-6, -1e-6, 4e-6]]))
    s.put(run, "claims", "C9", "process-1", {"not": "a decision"})
    s.finish_run(run)
    path = write_report(s, run, tmp_path / "out", command="simdiff report --quick")
    text = path.read_text()
    assert text.index("## Summary") < text.index("## Claims")
    summary = text[text.index("## Summary") : text.index("## Claims")]
    assert (
        "JAX-vs-PyTorch comparison article restated in the claim records of "
        "simdiff.validation.claims" in summary
    )
    assert (
        "(simdiff.validation.claims.RECORDS) give only its claims and figures: no title, author, "
        "date or URL" in text
    )
    assert re.search(r"torch.func eager takes \d+(\.\d)?x \(", summary)
    assert "torch.compile takes 0.05" in summary
    assert "confirmed: C1" in summary and "not measurable: C6" in summary
    assert "| C1 | Is JAX's batched 3rd derivative" in text
    assert "**confirmed**: JAX's batched 3rd derivative is at least 4x faster" in text
    assert "**not measurable** here" in text and "over 2 processes" in text
    assert "torch.compile / JAX" in text  # kept beside C1's verdict
    assert re.search(r"Threads: torch \d+ intra-op, \d+ inter-op; XLA \d+", text)
    assert "torch None" not in text
    assert "| rosenbrock4 | 4 | 2 | 0 | 0 | 0 |" in text and "**PASS**" in text
    assert "scipy-fd" in text and "left out of --quick" in text
    assert "np.float64" not in text
    for fig in ("fig_claims.png", "fig_first_call.png", "fig_ratio_to_jax.png"):
        assert (tmp_path / "out" / fig).stat().st_size > 1000
        assert f"]({fig})" in text
    assert "simdiff report --quick" in text
    html_text = _check_html(tmp_path / "out")
    assert "<lambda> raised & gave up" in html_text  # stored text shown, not parsed as a tag
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "fig_claims.png",
        "fig_first_call.png",
        "fig_ratio_to_jax.png",
        "report.html",
        "report.md",
    ]  # no temporary file left behind


class _Page(HTMLParser):
    """Every element opened is closed, in order; the text and the attributes collected."""

    VOID = frozenset({"meta", "img", "br", "hr", "link", "input", "col", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.text: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []  # (tag, attribute, value)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.attrs += [(tag, k, v or "") for k, v in attrs]

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open[-1] == tag, f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _check_html(out: Path) -> str:
    """report.html beside report.md: well formed, self-contained, every claim and verdict in it."""
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text(encoding="utf-8")
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.open == [], f"unclosed: {parser.open}"
    text = "".join(parser.text)
    rows = re.findall(r"^\| (C\d) \|.*\| ([^|]+) \|$", md, re.M)
    assert rows, "no claims table in report.md"
    for cid, verdict in rows:
        assert cid in text
        assert verdict.replace("**", "") in text, verdict
        word = re.match(r"\*\*([^*]+)\*\*", verdict).group(1)
        assert re.search(rf'<strong class="\w+">{word}</strong>', page), word
    assert "border" in page and "<style>" in page
    links = [(t, k, v) for t, k, v in parser.attrs if k in ("src", "href")]
    figures = re.findall(r"\]\((fig_[a-z_]+\.png)\)", md)
    assert len([1 for t, _, _ in links if t == "img"]) == len(figures) > 0
    for (_, _, v), fig in zip(links, figures, strict=True):
        head, data = v.split(",", 1)
        assert head == "data:image/png;base64", head  # inline, no file named
        assert base64.b64decode(data) == (out / fig).read_bytes()
    return text


def test_report_html_is_written_with_the_markdown_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = Store(tmp_path / "store")
    run = s.start_run("demo")
    s.put(run, "claims", "C6", "claim", _claim("C6", [[-2e-6, 3e-6, 1e-6], [2e-6, -1e-6, 4e-6]]))
    s.finish_run(run)
    out = tmp_path / "out"
    write_report(s, run, out)
    _check_html(out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args: object, **kwargs: object) -> str:
        raise InputError("render failed")

    monkeypatch.setattr(report_mod, "render_html", broken)
    with pytest.raises(InputError, match="render failed"):
        write_report(s, run, out)
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert after.keys() == before.keys()  # no temporary file, no report without its page
    for name in ("report.md", "report.html"):
        assert after[name] == before[name]


def test_render_html_refuses_a_figure_that_is_not_beside_the_report(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="'fig_gone.png' is not a file beside the report"):
        render_html("![gone](fig_gone.png)", tmp_path)
    page = render_html("`a <b>` and x < y, ```\n<c>\n```", tmp_path)
    assert "<b>" not in page and "<c>" not in page


#: Synthetic per-process values of every claim: C3's interval reaches infinity ("never"),
#: C6's reaches below zero, C8 lies far outside 1e-3..1e3 of its figure.
VALUES = {
    "C1": [[9.0, 10.0, 11.0], [10.0, 9.0, 10.5]],
    "C2": [[2.0, 2.5, 3.0], [2.2, 2.4, 2.6]],
    "C3": [[100.0, math.inf, 300.0], [math.inf, 200.0, math.inf]],
    "C4": [[3.0, 4.0, 5.0], [3.5, 4.5, 4.0]],
    "C5": [[1.1, 1.0, 0.9], [1.0, 1.05, 0.95]],
    "C6": [[-2e-6, 3e-6, 1e-6], [2e-6, -1e-6, 4e-6]],
    "C7": [[1.3, 1.2, 1.25], [1.22, 1.3, 1.28]],
    "C8": [[5e4, 6e4, 5.5e4], [5e4, 5e4, 6e4]],
}


def test_claims_figure_shows_every_claim_in_full_with_its_band() -> None:
    checks = {"checks": [(d, "pass", "") for d in ("hessian", "hvp", "derivative3")]}
    claims = [_claim(cid, v) for cid, v in VALUES.items()]
    claims.append(_claim("C9", [[]], details=checks))
    fig = claims_figure(claims)
    try:
        (ax,) = fig.axes
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert [" ".join(lab.split()) for lab in labels] == [claim_label(c) for c in claims]
        assert all(len(lab.split("\n")) >= 2 for lab in labels[:8])  # wrapped, not cut
        assert claim_label(claims[3]).endswith("torch.compile(dynamic=True)?")
        gids = {a.get_gid(): a for a in [*ax.collections, *ax.lines, *ax.texts] if a.get_gid()}
        xmin, xmax = ax.get_xlim()
        for c in claims[:8]:
            cid = c["id"]
            band = gids[f"band {cid}"].get_paths()[0].vertices[:, 0]
            lo, hi = (b / c["figure"] for b in c["band"])
            assert band.min() == pytest.approx(max(lo, xmin), rel=1e-9)
            assert band.max() == pytest.approx(min(hi, xmax), rel=1e-9)
            line = gids[f"interval {cid}"].get_xdata()
            assert xmin <= min(line) <= max(line) <= xmax
            words = gids[f"outcome {cid}"].get_text().split("\n")
            assert words[:2] == [c["outcome"], f"article {c['figure']:.3g}; band {c['band_text']}"]
        assert "interval reaches infinity" in gids["outcome C3"].get_text()
        assert max(gids["interval C3"].get_xdata()) == xmax
        assert "interval reaches <= 0" in gids["outcome C6"].get_text()
        assert min(gids["interval C6"].get_xdata()) == xmin
        assert xmax > 5e4 / claims[7]["figure"]  # the axis widens to hold C8
        assert gids["statistic C8"].get_xdata()[0] == pytest.approx(claims[7]["ratio"] / 1.2)
        assert gids["outcome C9"].get_text() == "refuted (no interval: a check)"
        assert "band C9" not in gids and "interval C9" not in gids
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
