from calendar_tools import merge_intervals, total_booked


def test_disjoint():
    assert merge_intervals([(1, 2), (4, 5)]) == [(1, 2), (4, 5)]


def test_overlap():
    assert merge_intervals([(1, 4), (2, 6)]) == [(1, 6)]


def test_unsorted():
    assert merge_intervals([(8, 10), (1, 3), (2, 4)]) == [(1, 4), (8, 10)]


def test_touching():
    assert merge_intervals([(1, 2), (2, 3)]) == [(1, 3)]


def test_total():
    assert total_booked([(5, 7), (1, 3), (2, 4)]) == 5


if __name__ == "__main__":
    failed = 0
    for name, fn in sorted(globals().items()):
        if name.startswith("test_"):
            try:
                fn()
                print("PASS", name)
            except AssertionError as exc:
                failed += 1
                print("FAIL", name, exc)
    raise SystemExit(1 if failed else 0)
