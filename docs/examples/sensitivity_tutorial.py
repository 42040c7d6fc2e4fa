"""The sensitivity tutorial (docs/sensitivity.md) end to end; writes its figures.

Run from the repository root::

    python -m docs.examples.sensitivity_tutorial

It prints every number the tutorial quotes and writes
docs/figures/sensitivity_{local,fim,dgsm,fit}.png.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import simdiff.problems as problems
from simdiff.problems.sensitivity import LV_EVERY, LV_STEPS, LV_T1

import simdiff
from simdiff.sensitivity import dgsm, fisher_information, laplace, local_sensitivity

FIG = Path(__file__).resolve().parents[1] / "figures"
NAMES = ["alpha", "beta", "delta", "gamma"]
np.set_printoptions(precision=4, suppress=False)


def main() -> None:
    FIG.mkdir(exist_ok=True)
    model = problems.get("lv4_observations")  # 24 outputs: (prey, predator) at t = 1..12
    t_obs = np.arange(1, LV_STEPS // LV_EVERY + 1) * (LV_T1 * LV_EVERY / LV_STEPS)

    # 1. local sensitivities ---------------------------------------------------------
    s = local_sensitivity(model)
    print(
        "importance (rms log-sensitivity):",
        dict(zip(NAMES, s.importance.round(3).tolist(), strict=True)),
    )
    print("ranking:", [NAMES[i] for i in s.ranking])
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    for k, species in enumerate(["prey", "predator"]):
        for j, name in enumerate(NAMES):
            ax[k].plot(t_obs, s.relative[k::2, j], marker="o", ms=3, label=name)
        ax[k].set_title(f"{species}: d log y / d log p")
        ax[k].set_xlabel("t")
    ax[0].legend()
    fig.tight_layout()
    fig.savefig(FIG / "sensitivity_local.png", dpi=110)

    # 2. Fisher information and sloppiness ------------------------------------------
    fim = fisher_information(model, sigma=0.5)
    print("FIM eigenvalues:", fim.eigenvalues)
    print(f"condition number: {fim.condition:.3g} |", fim.message)
    print(
        "sloppiest direction:",
        dict(zip(NAMES, fim.eigenvectors[:, -1].round(3).tolist(), strict=True)),
    )
    # in log parameters the spectrum is scale free: F_log = D F D with D = diag(p)
    flog = fisher_information(
        simdiff.Problem(lambda q, ops: model.fn(ops.exp(q), ops), x0=np.log(model.x0)), sigma=0.5
    )
    print("log-parameter FIM eigenvalues:", flog.eigenvalues)
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].semilogy(np.arange(1, 5), flog.eigenvalues, "o-")
    ax[0].set_xticks([1, 2, 3, 4])
    ax[0].set_title("eigenvalues of the FIM in log p")
    im = ax[1].imshow(np.abs(flog.eigenvectors), cmap="viridis", vmin=0, vmax=1)
    ax[1].set_xticks(range(4), [f"v{k + 1}" for k in range(4)])
    ax[1].set_yticks(range(4), NAMES)
    ax[1].set_title("|eigenvector components|")
    fig.colorbar(im, ax=ax[1])
    fig.tight_layout()
    fig.savefig(FIG / "sensitivity_fim.png", dpi=110)

    # 3. global: DGSM ---------------------------------------------------------------
    mean_prey = problems.get("lv4_mean_prey")
    g = dgsm(mean_prey, mean_prey.meta["distributions"], 4096, n_bootstrap=500, seed=0)
    print("DGSM nu:", g.nu)
    print("total-index bounds:", g.bound, "95% CI low", g.bound_ci[0], "high", g.bound_ci[1])
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    err = np.abs(g.bound_ci - g.bound)
    ax.bar(NAMES, g.bound, yerr=err, capsize=4)
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_title("DGSM upper bound on total Sobol index")
    fig.tight_layout()
    fig.savefig(FIG / "sensitivity_dgsm.png", dpi=110)

    # 4. fit with Laplace uncertainties -----------------------------------------------
    truth, sigma = model.x0, 0.5
    data = model.evaluate(truth) + sigma * np.random.default_rng(1).standard_normal(24)

    def residuals(p, ops):
        return (model.fn(p, ops) - ops.asarray(data)) / sigma

    def nll(p, ops):  # negative log-likelihood, Gaussian noise of known sigma
        return 0.5 * ops.sum(residuals(p, ops) ** 2)

    start = truth * np.array([1.2, 0.8, 1.1, 0.9])
    fit = simdiff.least_squares(simdiff.Problem(residuals, x0=start), xtol=1e-12, ftol=1e-12)
    print("least_squares:", fit.x, "nfev", fit.nfev, "njac", fit.njac)
    nllp = simdiff.Problem(nll, x0=start)
    try:  # from 20 % off, trust-exact's first steps overflow the RK4 model
        simdiff.minimize(nllp, method="trust-exact")
    except simdiff.NonFiniteError as exc:
        print("minimize from 20 % off:", type(exc).__name__, str(exc)[:60])
    opt = simdiff.minimize(nllp, truth * np.array([1.05, 0.95, 1.02, 0.98]), method="trust-exact")
    print("minimize trust-exact:", opt.x, "nit", opt.nit, "nhess", opt.nhess)
    lap = laplace(nllp, fit.x)
    gn = fisher_information(model, fit.x, sigma=sigma)
    for j, name in enumerate(NAMES):
        print(f"{name}: {fit.x[j]:.5f} +- {lap.std_errors[j]:.5f} (Laplace), "
              f"+- {gn.std_errors[j]:.5f} (Gauss-Newton); 95% CI "
              f"[{lap.ci[0, j]:.5f}, {lap.ci[1, j]:.5f}], true {truth[j]}")  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 3.2))
    y_fit = model.evaluate(fit.x)
    for k, (species, c) in enumerate([("prey", "C0"), ("predator", "C1")]):
        ax.errorbar(t_obs, data[k::2], yerr=sigma, fmt="o", color=c, ms=3, label=f"{species} data")
        ax.plot(t_obs, y_fit[k::2], color=c, label=f"{species} fit")
    ax.set_xlabel("t")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(FIG / "sensitivity_fit.png", dpi=110)


if __name__ == "__main__":
    main()
