"""Small statistics helpers."""


def mean(values):
    """Arithmetic mean of a non-empty list of numbers."""
    return sum(values) / len(values)


def median(values):
    """Median of a non-empty list of numbers (the input list is not modified)."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle]


def value_range(values):
    """Largest minus smallest value."""
    return max(values) - min(values)
