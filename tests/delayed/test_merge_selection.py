"""Which buckets a merge takes: PIP-195's example and Pulsar's selection tests, against brute force."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cursorkit.delayed import ImmutableBucket, select_merged_buckets
from cursorkit.errors import InvalidArgument


def bucket(
    i: int, count: int, *, next_ts: int = 0, merging: bool = False, loaded_last: bool = False
) -> ImmutableBucket:
    b = ImmutableBucket(
        i * 10,
        i * 10 + 9,
        current_segment_entry_id=2 if loaded_last else 1,
        last_segment_entry_id=2,
        number_bucket_delayed_messages=count,
        first_schedule_timestamps=[0, next_ts],
        bucket_id=100 + i,
        merging=merging,
    )
    return b


def test_pip_example_merges_second_and_third() -> None:
    buckets = [bucket(i, c) for i, c in enumerate([5, 3, 2, 4, 3])]
    assert select_merged_buckets(buckets, 2) == (1, 3)


def test_four_at_a_time_by_default() -> None:
    buckets = [bucket(i, c) for i, c in enumerate([9, 1, 1, 1, 1, 9])]
    assert select_merged_buckets(buckets) == (1, 5)


def test_ties_go_to_the_earliest_next_segment_then_leftmost() -> None:
    buckets = [bucket(i, 1, next_ts=t) for i, t in enumerate([50, 40, 30, 40, 50])]
    assert select_merged_buckets(buckets, 2) == (1, 3)  # windows (1,2) and (2,3) both hold ts 30
    same = [bucket(i, 1, next_ts=7) for i in range(4)]
    assert select_merged_buckets(same, 2) == (0, 2)


def test_ineligible_buckets_break_windows_and_k_shrinks() -> None:
    buckets = [
        bucket(0, 1),
        bucket(1, 1, merging=True),
        bucket(2, 5),
        bucket(3, 5),
        bucket(4, 5, loaded_last=True),
    ]
    assert select_merged_buckets(buckets, 4) == (2, 4)  # no eligible window of 4 or 3
    uncreated = bucket(5, 1)
    uncreated.bucket_id = None
    assert select_merged_buckets([bucket(0, 1), uncreated], 2) is None


def test_k_is_capped_at_the_bucket_count_and_checked() -> None:
    assert select_merged_buckets([bucket(0, 1), bucket(1, 1)], 4) == (0, 2)
    assert select_merged_buckets([bucket(0, 1)], 4) is None
    with pytest.raises(InvalidArgument):
        select_merged_buckets([], 1)


def brute(buckets: list[ImmutableBucket], k: int) -> tuple[int, int] | None:
    for size in range(min(k, len(buckets)), 1, -1):
        options = []
        for i in range(len(buckets) - size + 1):
            w = buckets[i : i + size]
            if all(
                b.created and not b.merging and b.last_segment_entry_id > b.current_segment_entry_id
                for b in w
            ):
                options.append(
                    (
                        sum(b.number_bucket_delayed_messages for b in w),
                        min(b.next_unloaded_timestamp() for b in w),
                        i,
                    )
                )
        if options:
            best = min(options)
            return best[2], best[2] + size
    return None


@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 5), st.booleans(), st.booleans()), max_size=9),
    st.integers(2, 5),
)
def test_matches_brute_force(spec: list[tuple[int, int, bool, bool]], k: int) -> None:
    buckets = [bucket(i, c, next_ts=t, merging=m, loaded_last=d) for i, (c, t, m, d) in enumerate(spec)]
    got = select_merged_buckets(buckets, k)
    assert got == brute(buckets, k)
    if got is not None:
        assert all(b.created for b in itertools.islice(buckets, got[0], got[1]))
