"""Tool policy: whether a call runs, waits for the user, or is never offered; the circuit
breakers (`breaker`), the result cache (`cache`) and the approval wait (`approval`).

A tool's policy is decided in three levels, each from one place:

1. **Declaration** — `@tool(policy=…)`; by default "ask" for tools with side effects, else
   "auto" (an MCP tool has side effects unless its server marks it read-only).
2. **Admin** — a tool's own policy (`ToolRule`), else its toolset's (`ToolsetConfig.policy`),
   replaces the declaration: an admin may loosen or tighten.
3. **User** — a user's own policy for a tool (`UserToolPolicy`) only ever makes it stricter.

"deny" tools are never offered to the model and fail if called anyway. "Always allow this tool
in this chat" (`ChatToolAllowance`) turns "ask" into "auto" for one chat, never "deny".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base import POLICIES, Tool, Toolset

AUTO, ASK, DENY = POLICIES
LABELS = {AUTO: "Auto", ASK: "Ask", DENY: "Deny"}


def stricter(a: str, b: str) -> str:
    """The stricter of two policies ("" counts as no opinion)."""
    if not a or not b:
        return a or b
    return a if POLICIES.index(a) >= POLICIES.index(b) else b


@dataclass(frozen=True)
class Resolved:
    """A tool's policy for one user, and where each level said what."""

    policy: str
    declared: str
    admin: str = ""  # what the admin set ("" when they left it to the declaration)
    user: str = ""  # the user's own stricter choice, if any
    cache_enabled: bool = True

    @property
    def admin_policy(self) -> str:
        """What the user starts from: the admin's policy, else the declaration."""
        return self.admin or self.declared

    @property
    def user_choices(self) -> list[str]:
        """The policies a user may pick for themselves: as strict as the admin's, or stricter."""
        return list(POLICIES[POLICIES.index(self.admin_policy) :])


def resolve(tool: Tool, *, toolset_policy: str = "", tool_policy: str = "", user_policy: str = "") -> Resolved:
    """Declaration → admin (the tool's own rule, else the toolset's) → user (stricter only)."""
    declared = tool.declared_policy
    admin = tool_policy or toolset_policy
    policy = stricter(admin or declared, user_policy)
    return Resolved(policy=policy, declared=declared, admin=admin, user=user_policy)


class PolicyBook:
    """Every tool's policy for one user, read in three queries (call from a thread); two when the
    caller has the admin's toolset policies already (`toolset_policies`, from availability)."""

    def __init__(self, user_id: int | None, toolset_policies: dict[str, str] | None = None) -> None:
        from ..models import ToolRule, ToolsetConfig, UserToolPolicy

        if toolset_policies is None:
            toolset_policies = dict(ToolsetConfig.objects.exclude(policy="").values_list("toolset_id", "policy"))
        self.toolset_policies = toolset_policies
        self.rules = {(r.toolset_id, r.tool): r for r in ToolRule.objects.all()}
        self.user_policies: dict[tuple[str, str], str] = {}
        if user_id is not None:
            rows = UserToolPolicy.objects.filter(user_id=user_id).values_list("toolset_id", "tool", "policy")
            self.user_policies = {(t, n): p for t, n, p in rows}

    def get(self, toolset: Toolset, tool: Tool) -> Resolved:
        rule = self.rules.get((toolset.id, tool.name))
        found = resolve(
            tool,
            toolset_policy=self.toolset_policies.get(toolset.id, ""),
            tool_policy=rule.policy if rule else "",
            user_policy=self.user_policies.get((toolset.id, tool.name), ""),
        )
        if rule is not None and not rule.cache_enabled:
            found = Resolved(found.policy, found.declared, found.admin, found.user, cache_enabled=False)
        return found


def for_tool(user_id: int | None, toolset: Toolset, tool: Tool) -> Resolved:
    """One tool's policy for one user, in three small queries (call from a thread)."""
    from ..models import ToolRule, ToolsetConfig, UserToolPolicy

    toolset_policy = ToolsetConfig.objects.filter(toolset_id=toolset.id).values_list("policy", flat=True).first()
    rule = ToolRule.objects.filter(toolset_id=toolset.id, tool=tool.name).first()
    user_policy = ""
    if user_id is not None:
        user_policy = (
            UserToolPolicy.objects.filter(user_id=user_id, toolset_id=toolset.id, tool=tool.name)
            .values_list("policy", flat=True)
            .first()
        ) or ""
    found = resolve(
        tool, toolset_policy=toolset_policy or "", tool_policy=rule.policy if rule else "", user_policy=user_policy
    )
    if rule is not None and not rule.cache_enabled:
        found = Resolved(found.policy, found.declared, found.admin, found.user, cache_enabled=False)
    return found


def allowed_in_chat(chat_id: int | None, toolset_id: str, tool: str) -> bool:
    from ..models import ChatToolAllowance

    if chat_id is None:
        return False
    return ChatToolAllowance.objects.filter(chat_id=chat_id, toolset_id=toolset_id, tool=tool).exists()
