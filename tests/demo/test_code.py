"""The demo model's Code intents: fenced code it is asked to run, and a chart of an attached CSV."""

from __future__ import annotations

from demo import code


def test_run_this_python_runs_the_fenced_code() -> None:
    found = code.intents("Please run this python:\n```python\nprint(6 * 7)\n```")
    assert [(i.tool, i.toolset, i.arguments) for i in found] == [("run_python", "code", {"code": "print(6 * 7)\n"})]


def test_a_fence_without_a_request_to_run_it_is_not_run() -> None:
    assert code.intents("What does this do?\n```python\nprint(1)\n```") == []


def test_plot_this_csv_charts_the_attached_file() -> None:
    message = "plot this CSV\n\n[Attached files:\n- “spend.csv” (file_id 3, CSV, 1 KB)]"
    (intent,) = code.intents(message)
    assert "pd.read_csv('/data/spend.csv')" in intent.arguments["code"]
    assert "plt.show()" in intent.arguments["code"] and 'to_csv("summary.csv")' in intent.arguments["code"]
    compile(intent.arguments["code"], "<plot>", "exec")


def test_the_answer_quotes_the_output() -> None:
    assert code.answer("stdout:\n42") == "I ran the code in this chat's sandbox:\n\n```text\nstdout:\n42\n```"
    assert code.answer("The code failed: ValueError: x").startswith("The code did not finish cleanly")
