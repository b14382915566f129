"""The demo model and the Code toolset: "run this python: ```…```" runs the fenced code, and
"plot this CSV" (with a CSV attached) writes pandas and matplotlib code that charts it, prints
its summary and saves that summary as a file."""

from __future__ import annotations

import re

from .files import attached, own_words
from .reading import Intent

CODE = "code"
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(?P<code>.*?)```", re.DOTALL | re.IGNORECASE)
_RUN = re.compile(r"\b(?:run|execute|evaluate)\b", re.IGNORECASE)
_PLOT = re.compile(r"\b(?:plot|chart|graph|visuali[sz]e)\b.*\b(?:csv|data|file|spreadsheet|table)\b", re.IGNORECASE)
_PLOT_CODE = """import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_csv({path!r})
print(f"{{len(df)}} rows, columns: {{', '.join(df.columns)}}")
numbers = df.select_dtypes("number")
summary = numbers.describe()
print(summary)
label = df.columns[0] if df.columns[0] not in numbers.columns else None
table = (df.set_index(label) if label else df)[numbers.columns]
ax = table.plot(kind="bar" if len(df) <= 24 else "line", figsize=(7, 4))
ax.set_title({title!r})
plt.tight_layout()
plt.show()
summary.to_csv("summary.csv")
"""


def intents(message: str) -> list[Intent]:
    own = own_words(message)
    fenced = _FENCE.search(own)
    if fenced and _RUN.search(own[: fenced.start()]):
        return [Intent("run_python", CODE, {"code": fenced["code"]})]
    if _PLOT.search(" ".join(own.split())):
        csvs = [name for _, name, _ in attached(message) if name.lower().endswith(".csv")]
        path = f"/data/{csvs[0]}" if csvs else "/data/data.csv"
        return [Intent("run_python", CODE, {"code": _PLOT_CODE.format(path=path, title=path.rsplit("/", 1)[-1])})]
    return []


def answer(content: str) -> str:
    """The answer after a run: what it printed (shortened), or how it failed."""
    text = content.strip()
    if len(text) > 1500:
        text = text[:1500] + "\n…"
    if "The code failed:" in text or "was restarted" in text:
        return f"The code did not finish cleanly:\n\n```text\n{text}\n```"
    return f"I ran the code in this chat's sandbox:\n\n```text\n{text}\n```"
