"""formulas/speed.py eq. (9'''): the MMQ tiles a llama.cpp mul_mat_id runs per routed expert, against a replay of
ggml-cuda's host tile choice and of the routing itself (independent of the binomial sum the formula uses).

mmq.cuh mul_mat_q_case (ggml-org/ggml @da232870 L3650-3666) takes, over mmq_x = 8, 16, ..., mmq_x_max (128 with
Turing MMA, get_mmq_x_max_host L94-102) whose value is a multiple of mmq_get_granularity_host (L233-241: 16 from 48
columns with Turing MMA, else 8), the first mmq_x with the fewest tiles ceil(ncols_max / mmq_x), stopping once one tile
holds them; mmq.cu ggml_cuda_mul_mat_q passes ncols_max = ne12, the ubatch's tokens, for mul_mat_id. mul_mat_q then runs
ceil(m_e / mmq_x) tiles for an expert with m_e columns (tiles past col_diff skipped, mmq.cuh L3263-3274).
"""

from __future__ import annotations

import math
import random

import pytest

from llmsizer.errors import InputError
from llmsizer.formulas.speed import mmq_tile_width, moe_expert_tiles


def _host_mmq_x(ncols_max: int, mmq_x_max: int = 128) -> int:
    """mul_mat_q_case's loop, shared-memory limit aside (a smaller mmq_x only if the larger does not fit)."""
    best, best_tiles = 0, math.inf
    mmq_x = 8
    while mmq_x <= mmq_x_max and best_tiles > 1:
        granularity = 16 if mmq_x >= 48 else 8
        if mmq_x % granularity == 0:
            tiles = -(-ncols_max // mmq_x)
            if tiles < best_tiles:
                best, best_tiles = mmq_x, tiles
        mmq_x += 8
    return best


def test_tile_width_replays_the_host_choice() -> None:
    for n in range(1, 600):
        assert mmq_tile_width(n, 128) == _host_mmq_x(n), n


def _simulated_tiles(tokens: int, ubatch: int, k: int, experts: int, trials: int, seed: int) -> tuple[float, float]:
    """Route every token to k distinct experts uniformly, ubatch by ubatch; count each expert's tiles as mul_mat_q
    runs them; mean tiles and executed columns per expert."""
    rng = random.Random(seed)
    tiles = columns = 0.0
    for _ in range(trials):
        left = tokens
        while left:
            n = min(ubatch, left)
            left -= n
            width = _host_mmq_x(n)
            counts = [0] * experts
            for _t in range(n):
                for e in rng.sample(range(experts), k):
                    counts[e] += 1
            t = sum(-(-c // width) for c in counts)
            tiles += t / experts
            columns += t * width / experts
    return tiles / trials, columns / trials


@pytest.mark.parametrize(("tokens", "ubatch", "k", "experts"), [
    (2048, 2048, 8, 128),   # Qwen3-30B-A3B, the calibration row's shape: 128 columns per expert
    (2048, 2048, 4, 128),   # gpt-oss-120b: 64 per expert, one half-filled tile
    (2048, 2048, 4, 32),    # gpt-oss-20b: 256 per expert
    (1000, 512, 8, 64),     # a full ubatch and a rest of 488 tokens
    (40, 512, 2, 8),        # one ubatch narrower than a tile: mmq_x = 40
])
def test_expected_tiles_match_simulated_routing(tokens: int, ubatch: int, k: int, experts: int) -> None:
    tiles, columns = moe_expert_tiles(tokens, ubatch, k, experts, 128)
    sim_tiles, sim_columns = _simulated_tiles(tokens, ubatch, k, experts, trials=40, seed=tokens + k)
    assert tiles == pytest.approx(sim_tiles, rel=0.02)
    assert columns == pytest.approx(sim_columns, rel=0.02)


def test_padding_of_half_filled_tiles() -> None:
    """64 routed columns per expert in a 2048-token ubatch: one 128-column tile each, twice the routed work."""
    tiles, columns = moe_expert_tiles(2048, 2048, 4, 128, 128)
    assert tiles == pytest.approx(1.0, abs=1e-6)
    assert columns == pytest.approx(2 * 2048 * 4 / 128, rel=1e-6)


def test_every_expert_used() -> None:
    """300 tokens, every expert takes all: mmq_x = 112 (the first multiple of 16 holding 300 in 3 tiles), 3 tiles."""
    assert moe_expert_tiles(300, 512, 4, 4, 128) == (3.0, 336.0)


def test_bad_input() -> None:
    with pytest.raises(InputError):
        moe_expert_tiles(0, 512, 4, 32, 128)
    with pytest.raises(InputError):
        moe_expert_tiles(512, 512, 40, 32, 128)
    with pytest.raises(InputError):
        mmq_tile_width(0, 128)
