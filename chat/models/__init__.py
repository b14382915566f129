"""The chat app's models, one module per idea: the models on offer (catalog), the admin's
settings (app_settings), conversations (chats, turns, messages, summaries, a user's defaults),
spend (token usage, budgets, the spend ledger), sharing (read-only links) and agents (admin-defined
subagents). `from chat.models import X` reads them all from here."""

from .agents import AgentDefinition
from .app_settings import AppSettings
from .catalog import DEMO_MODEL, GROUPS_HELP, LLMModel, open_to
from .conversation import Chat, ContextSummary, Message, Turn, UserChatDefaults
from .pending import PendingMessage
from .sharing import ChatShare
from .spend import Budget, Spend, TokenUsage

__all__ = [
    "DEMO_MODEL",
    "GROUPS_HELP",
    "AgentDefinition",
    "AppSettings",
    "Budget",
    "Chat",
    "ChatShare",
    "ContextSummary",
    "LLMModel",
    "Message",
    "PendingMessage",
    "Spend",
    "TokenUsage",
    "Turn",
    "UserChatDefaults",
    "open_to",
]
