"""Booking calendar helpers."""


def merge_intervals(intervals):
    """Merge (start, end) intervals; returns a sorted list of disjoint intervals."""
    merged = []
    for start, end in intervals:
        if merged and start < merged[-1][1]:
            last_start, last_end = merged[-1]
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def total_booked(intervals):
    """Total length covered by the intervals, overlaps counted once."""
    return sum(end - start for start, end in merge_intervals(intervals))
