"""The device-block check (zoo/stats/blocks.py) against answers worked by hand, and in the reports."""

import math

import pytest

from zoo.stats.blocks import block_test


def test_a_block_effect_and_its_exact_permutation_p_by_hand():
    """Two arms at different levels, seeds 0-3 rising by 1 in both: each seed's deviation from its arm's mean is
    -1.5, -0.5, +0.5, +1.5. Seeds {2, 3} against {0, 1}: +2.0. Of the 6 ways to choose 2 of 4 seeds, {2, 3} and
    {0, 1} reach |2.0| (the others give 1, 0, 0, 1): p = 2/6, which is also the smallest 2 v 2 allows."""
    values = {"a": {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}, "b": {0: 12.0, 1: 13.0, 2: 14.0, 3: 15.0}}
    test = block_test(values, {2, 3})
    assert test.effect == pytest.approx(2.0)
    assert test.p_value == pytest.approx(2 / 6) and test.floor == pytest.approx(2 / 6)
    assert (test.n_group, test.n_rest, test.arms) == (2, 2, 2)
    middle = block_test(values, {1, 2})  # -0.5 and +0.5 against -1.5 and +1.5: no difference, every split as far
    assert middle.effect == pytest.approx(0.0) and middle.p_value == 1.0


def test_one_seed_against_four_can_reach_only_a_fifth():
    values = {"a": {0: 10.0, 1: 0.0, 2: 0.1, 3: 0.2, 4: 0.3}}
    test = block_test(values, {0})
    assert test.effect == pytest.approx(10.0 - 0.15)
    assert test.p_value == pytest.approx(1 / 5) == test.floor == pytest.approx(1 / math.comb(5, 1))


def test_no_block_on_one_side_is_no_test():
    assert block_test({"a": {0: 1.0, 1: 2.0}}, {0, 1}) is None
    assert block_test({"a": {0: 1.0, 1: 2.0}}, set()) is None


def test_an_arm_missing_a_seed_is_centred_on_its_own_mean():
    """Arm b has no seed 3. Deviations: a -1.5, -0.5, +0.5, +1.5 (mean 2.5); b -1, 0, +1 (mean 13). Seed 3's block
    is +1.5 (a alone), the others' mean (-1.25 - 0.25 + 0.75) / 3 = -0.25: +1.75. Raw scores would put seed 3, with
    arm a's low level alone, far below the rest."""
    values = {"a": {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}, "b": {0: 12.0, 1: 13.0, 2: 14.0}}
    assert block_test(values, {3}).effect == pytest.approx(1.75)
