"""Windowing of the scorer input (METHOD.md, "Score": --overflow window|skip)."""

from iclr_cli.scoring.window import plan_window


def test_everything_fits():
    plan = plan_window(100, [50, 50], 30, 1000)
    assert (plan.first_history, plan.prompt_cut, plan.skipped, plan.windowed) == (0, 0, None, False)


def test_skip_mode_leaves_over_limit_step_unpruned():
    plan = plan_window(100, [500, 500], 30, 1000, overflow="skip")
    assert plan.skipped and "--overflow skip" in plan.skipped


def test_step_over_limit_is_skipped_in_any_mode():
    assert plan_window(10, [], 2000, 1000).skipped.startswith("step is 2000 tokens")


def test_window_keeps_most_recent_history_on_a_stride_grid():
    hist = [100] * 20  # offsets 0, 100, ..., 1900
    plan = plan_window(100, hist, 100, 1000, stride=250)
    # budget 800 -> minimal start index 12 (offset 1200, on the 250-grid at 1250 -> index 13)
    assert plan.first_history == 13
    assert plan.windowed
    kept = sum(hist[plan.first_history:])
    assert 100 + kept + 100 <= 1000


def test_window_start_is_stable_while_history_grows():
    starts = [plan_window(50, [100] * n, 100, 1000, stride=300).first_history for n in range(1, 40)]
    assert starts == sorted(starts)
    changes = sum(1 for a, b in zip(starts, starts[1:]) if a != b)
    assert changes <= 13  # moves in jumps of >= 3 steps, not every step


def test_prompt_cut_when_prompt_and_step_do_not_fit():
    plan = plan_window(900, [10], 300, 1000)
    assert plan.prompt_cut == 200
    assert plan.first_history == 1
