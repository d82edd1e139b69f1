"""``shard_each`` (a per-layer list's shards mapped in C) is ``shard`` of each element: the same true division and
ceil, so the same integers, also beyond 2**53 where the float division rounds."""

from llmsizer.formulas.parallelism import shard, shard_each


def test_shard_each_is_shard_of_each() -> None:
    totals = [0, 1, 7, 8, 9, 1023, 10**9 + 7, 2**53 - 1, 2**53 + 1, 3 * 2**60 + 5, 123456789012345678]
    for ways in (0, 1, 2, 3, 8, 64, 1000):
        assert list(shard_each(totals, ways)) == [shard(t, ways) for t in totals]
