"""What a turn's life tells the floors above chat (automations) without chat importing them.

`turn_started` and `turn_closed` are sent for a run's turns only (`Chat.automated`: the floor
that runs chats marks the chat when it makes it); a turn of any other chat sends neither, and so
pays nothing for them. `turn_closed` is sent once per turn, by the one place a turn ends
(`Turn.close`, and a queued turn stopped before any worker took it), after the change is
committed. `question_opened` and `question_closed` bracket a tool call waiting for its owner's
answer (an Ask tool's approval, an MCP server's question). Receivers run in the sending thread (a
worker's database thread): they must be quick and must not raise into the turn (`send_robust`).

Each carries `automated`: whether the turn's chat is a run, or None where the sender did not have
the chat at hand; receivers that only care about runs return on False without a query, so
ordinary turns pay nothing for automations.

`run_badges` and `run_budgets` ask the floor that runs chats (automations) about chats marked
`automated` only: what badge each shows, and the budgets a run's calls also count against."""

from __future__ import annotations

from typing import TypedDict

from django.dispatch import Signal

# kwargs: turn_id, automated (a worker claimed it: queued → running)
turn_started = Signal()
# kwargs: turn_id, chat_id, status, error, automated
turn_closed = Signal()
# kwargs: turn_id, chat_id, question_id, title, automated
question_opened = Signal()
# kwargs: turn_id, chat_id, question_id, automated
question_closed = Signal()
# kwargs: chat_ids; a receiver answers {chat_id: RunBadge} (one query for them all).
run_badges = Signal()
# kwargs: chat_id, redis (a blocking client); a receiver answers a list of
# chat.spend.budgets.Counter, started in Redis (sent from the worker's database thread).
run_budgets = Signal()


class RunBadge(TypedDict):
    """What the chat list and the chat's header show of a run: its automation and status."""

    name: str  # the automation's
    url: str  # the automation's page
    status: str  # the run's status (queued, running, waiting, completed, failed)
    status_label: str
