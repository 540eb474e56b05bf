"""Progress off a terminal: a long run in CI or a log says how far it got (fresh-user trial)."""

from iclr_cli.render.output import Output


def test_progress_off_a_terminal_prints_counts_and_rates(capsys):
    out = Output(None)
    with out.progress("scoring steps", every_s=0.0) as advance:
        advance()
        advance(2)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["scoring steps: 1 steps", "scoring steps: 3 steps"]
    assert all(line.endswith(" s") and "/s)" in line for line in lines)


def test_progress_is_silent_when_quiet_or_between_intervals(capsys):
    with Output(None, quiet=True).progress("x", every_s=0.0) as advance:
        advance()
    with Output(None).progress("y", every_s=3600.0) as advance:
        advance()
    assert capsys.readouterr().err == ""
