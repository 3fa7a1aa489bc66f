"""Do the seeds trained on one device score differently from the rest? The device-block check.

A grid split between machines gives each seed to one device for every arm, so the device is a block of
seeds: balanced across the arms, it cannot bias a comparison, but it adds to the seed spread, and a reader
should know its size. Per seed, the block value is the mean over the arms of the seed's deviation from its
arm's mean (so arms of different levels are comparable); the effect is the mean block value of the seeds
in the group minus that of the others. The test is the exact permutation test of that difference over
every way to choose the group's number of seeds from all of them: the seeds are the unit, exchangeable
under "the device makes no difference". With few seeds it has little resolution (2 of 5 seeds allow 10
splits, so p >= 0.1), and `floor` says so: a p at the floor is the strongest evidence the design allows.

Pure statistics: numbers in, numbers out, nothing else from zoo.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import combinations

import numpy as np


@dataclass(frozen=True)
class BlockTest:
    effect: float  # mean block value of the group's seeds minus the others'
    p_value: float  # two-sided exact permutation p (the observed split counts)
    floor: float  # the smallest p these group sizes allow
    n_group: int
    n_rest: int
    arms: int  # how many arms contributed


def block_test(values: Mapping[str, Mapping[int, float]], group: Collection[int]) -> BlockTest | None:
    """`values`: arm -> seed -> score (finite scores only); `group`: the seeds of one block. None when either
    side has no seed."""
    deviations: dict[int, list[float]] = {}
    for scores in values.values():
        if len(scores) < 2:
            continue  # an arm with one seed says nothing about seeds
        mean = float(np.mean(list(scores.values())))
        for seed, score in scores.items():
            deviations.setdefault(seed, []).append(score - mean)
    seeds = sorted(deviations)
    chosen = [s for s in seeds if s in set(group)]
    if not chosen or len(chosen) == len(seeds):
        return None
    block = np.array([np.mean(deviations[s]) for s in seeds])
    inside = np.array([s in chosen for s in seeds])

    def difference(mask: np.ndarray) -> float:
        return float(block[mask].mean() - block[~mask].mean())

    observed = difference(inside)
    splits = [np.isin(np.arange(len(seeds)), c) for c in combinations(range(len(seeds)), len(chosen))]
    tolerance = 1e-12 * max(1.0, abs(observed))
    extreme = sum(abs(difference(mask)) >= abs(observed) - tolerance for mask in splits)
    # the observed split and its mirror (when the sizes are equal) are always as extreme as themselves
    floor = (2 if len(chosen) * 2 == len(seeds) else 1) / math.comb(len(seeds), len(chosen))
    return BlockTest(observed, extreme / len(splits), floor, len(chosen), len(seeds) - len(chosen),
                     sum(len(scores) >= 2 for scores in values.values()))
