"""The statistics of the paper's tables and of the benchmarks: accuracy over seeds, McNemar's
test, and the nearest-rank percentile the latency figures use.

McNemar compares two methods on the same attempts (paired): ``a_only`` attempts only A
passed, ``b_only`` only B. chi2 = (|a_only - b_only| - 1)^2 / (a_only + b_only) with one
degree of freedom (continuity correction); the exact p is the two-sided binomial test of
a_only out of a_only + b_only at 1/2; the odds ratio is a_only / b_only (infinite when
b_only is 0).

Run ``python -m arc_vllm.reports.stats`` for an example.
"""

from __future__ import annotations

import math
import statistics


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` 0.5: the median; 0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def mean_sd(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def chi_square_p(statistic: float) -> float:
    """Upper tail of the chi-square distribution with one degree of freedom."""
    return math.erfc(math.sqrt(max(statistic, 0.0) / 2))


def binomial_two_sided_p(successes: int, trials: int) -> float:
    if trials == 0:
        return 1.0
    low = min(successes, trials - successes)
    tail = sum(math.comb(trials, k) for k in range(low + 1)) / 2 ** trials
    return min(1.0, 2 * tail)


def mcnemar(a: list[bool], b: list[bool]) -> dict:
    """A vs B on paired outcomes (same attempts, same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired outcomes differ in length: {len(a)} and {len(b)}")
    a_only = sum(1 for x, y in zip(a, b) if x and not y)
    b_only = sum(1 for x, y in zip(a, b) if y and not x)
    both = sum(1 for x, y in zip(a, b) if x and y)
    neither = len(a) - a_only - b_only - both
    discordant = a_only + b_only
    chi2 = (abs(a_only - b_only) - 1) ** 2 / discordant if discordant else 0.0
    return {"a_only": a_only, "b_only": b_only, "both": both, "neither": neither,
            "chi2": chi2, "chi2_p": chi_square_p(chi2) if discordant else 1.0,
            "exact_p": binomial_two_sided_p(a_only, discordant),
            "odds_ratio": a_only / b_only if b_only else (math.inf if a_only else math.nan)}


if __name__ == "__main__":
    a = [True] * 90 + [False] * 10
    b = [True] * 60 + [False] * 30 + [True] * 5 + [False] * 5
    print(mcnemar(a, b))
