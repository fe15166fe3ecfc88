"""``memstack.cli.progress.ProgressBar``: a tqdm bar on a terminal, plain lines elsewhere, nothing when
quiet."""

from __future__ import annotations

import io

from memstack.cli.progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_given_a_terminal_when_a_job_advances_then_a_bar_redrawn_in_place() -> None:
    stream = Terminal()
    with ProgressBar("import", stream=stream) as bar:
        bar.start(200, "messages")
        bar.advance(100)
        bar.advance(100)
    shown = stream.getvalue()
    assert "\r" in shown and "import: 100%|" in shown and "200/200" in shown


def test_given_no_terminal_when_a_job_advances_then_a_line_at_each_tenth_and_at_the_end() -> None:
    stream = io.StringIO()
    with ProgressBar("export", stream=stream) as bar:
        bar.start(100, "messages")
        for _ in range(100):
            bar.advance(1)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0] == "export: 0/100 messages (0%)" and lines[-1] == "export: 100/100 messages (100%)"
    assert len(lines) == 11


def test_given_quiet_when_a_job_advances_then_nothing_is_shown() -> None:
    stream = Terminal()
    with ProgressBar("reindex", stream=stream, quiet=True) as bar:
        bar.start(10, "messages")
        bar.advance(10)
    assert stream.getvalue() == ""
