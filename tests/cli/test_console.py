"""Progress off a terminal: periodic plain lines instead of a live bar."""

import cn3.util.console as console_module


def test_plain_progress_lines_when_not_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr(console_module, "LOG_INTERVAL", 0.0)
    bar = console_module.progress()
    assert bar.disable  # pytest's stderr is not a terminal
    with bar:
        task = bar.add_task("annotating (spacy)", total=200, rate="")
        bar.update(task, completed=100, rate="50 sent/s")
        bar.update(task, completed=200, rate="60 sent/s")
    err = capsys.readouterr().err
    assert "annotating (spacy): 100/200 50 sent/s" in err and "200/200 60 sent/s" in err


def test_no_line_before_the_interval(monkeypatch, capsys):
    monkeypatch.setattr(console_module, "LOG_INTERVAL", 3600.0)
    with console_module.progress() as bar:
        bar.update(bar.add_task("epoch 1/2", total=10, rate=""), completed=5)
    assert capsys.readouterr().err == ""
