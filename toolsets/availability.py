"""The one answer to "can this user use this toolset now, and if not, why?".

The settings page, the chat's toolset picker, the agent loop and the execution API all call
`for_user`, so they can never disagree. A toolset that is not usable has exactly one reason,
checked in this order:

1. "Disabled by administrator" — an admin switched it off app-wide (or, for a toolset that is
   off until enabled, has not switched it on).
   "Not available to your groups" — the admin limited it (its configuration, or its MCP
   server) to groups the user is not in. Read fresh each time: a membership change counts
   from the next turn.
2. "Disabled in settings"      — the user switched it off.
3. "Configure in Toolsets settings" — the user has a setup step to do first (e.g. create their
   workspace), or the toolset is off until a user turns it on.
4. "API key not configured"    — it needs a key and neither the user nor the admin gave one.

A toolset may add a live condition of its own (`Toolset.status_check`), checked after the two
switches: an MCP server answers "Server unreachable", with the last error and when it was seen
in `detail`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import reverse

from core import groups as member_groups
from core.groups import NOT_IN_GROUPS

from .base import Toolset
from .models import ToolsetConfig, UserToolsetConfig
from .registry import all_toolsets

DISABLED_BY_ADMIN = "Disabled by administrator"
DISABLED_BY_USER = "Disabled in settings"
NEEDS_SETUP = "Configure in Toolsets settings"
NO_API_KEY = "API key not configured"
DEFAULT_RATE_LIMIT = 60


@dataclass(frozen=True)
class Availability:
    toolset: Toolset
    usable: bool
    reason: str = ""
    # More about the reason, for people (e.g. the server's last error and when it happened).
    detail: str = ""
    admin_enabled: bool = True
    user_enabled: bool = True
    needs_setup: bool = False
    has_user_key: bool = False
    has_app_key: bool = False
    user_key_mask: str = ""
    rate_limit_per_minute: int = DEFAULT_RATE_LIMIT
    settings: dict[str, Any] = field(default_factory=dict)
    # The admin's policy for the toolset's tools ("" when none is set: each tool's own applies).
    admin_policy: str = ""
    # The key a call will use (the user's own first). Never rendered.
    api_key: str = field(default="", repr=False)

    @property
    def settings_url(self) -> str:
        return reverse("toolsets:settings") + f"#toolset-{self.toolset.id}"

    @property
    def can_set_up(self) -> bool:
        # A property, not `toolset.setup` in templates: Django would call the function.
        return self.needs_setup and self.toolset.setup is not None and self.admin_enabled

    @property
    def blocked_by_admin(self) -> bool:
        """Nothing the user can do about it: the settings page shows no controls."""
        return self.reason in (DISABLED_BY_ADMIN, NOT_IN_GROUPS)

    @property
    def fixable_by_user(self) -> bool:
        return self.reason in (DISABLED_BY_USER, NEEDS_SETUP, NO_API_KEY)


def for_user(user_id: int, groups: frozenset[int] | None = None) -> dict[str, Availability]:
    """Availability of every registered toolset for one user, in four queries (three when the
    caller read the user's `groups` already, to share them with the agents' check)."""
    admin = {c.toolset_id: c for c in ToolsetConfig.objects.prefetch_related("groups")}
    mine = {c.toolset_id: c for c in UserToolsetConfig.objects.filter(user_id=user_id)}
    groups = member_groups.of_user(user_id) if groups is None else groups
    return {tid: _decide(ts, admin.get(tid), mine.get(tid), user_id, groups) for tid, ts in all_toolsets().items()}


def for_toolset(user_id: int, toolset_id: str) -> Availability | None:
    toolset = all_toolsets().get(toolset_id)
    if toolset is None:
        return None
    admin = ToolsetConfig.objects.filter(toolset_id=toolset_id).prefetch_related("groups").first()
    mine = UserToolsetConfig.objects.filter(user_id=user_id, toolset_id=toolset_id).first()
    return _decide(toolset, admin, mine, user_id, member_groups.of_user(user_id))


def _decide(
    toolset: Toolset,
    admin: ToolsetConfig | None,
    mine: UserToolsetConfig | None,
    user_id: int,
    groups: frozenset[int],
) -> Availability:
    from core.crypto import mask

    admin_enabled = (admin.enabled if admin else not toolset.off_until_enabled) and toolset.enabled
    # Both the toolset's configuration and (for an MCP server) the server may name groups:
    # the user must be let in by each that does.
    admin_groups = [group.pk for group in admin.groups.all()] if admin else []
    in_groups = member_groups.allows(admin_groups, groups) and member_groups.allows(toolset.group_ids, groups)
    user_enabled = mine.enabled if mine else toolset.enabled_by_default
    user_key = mine.api_key if mine else ""
    app_key = admin.api_key if admin and not toolset.user_key_only else ""
    needs_setup = bool(toolset.needs_setup and toolset.needs_setup(user_id))
    settings = {**toolset.default_settings, **(admin.settings if admin else {})}
    live_reason, detail = toolset.status_check() if toolset.status_check else ("", "")
    if not admin_enabled:
        reason = DISABLED_BY_ADMIN
    elif not in_groups:
        reason = NOT_IN_GROUPS
    elif mine is not None and not mine.enabled:
        reason = DISABLED_BY_USER
    elif live_reason:
        reason = live_reason
    elif needs_setup or not user_enabled:
        reason = NEEDS_SETUP
    elif toolset.needs_api_key and not (user_key or app_key):
        reason = NO_API_KEY
    else:
        reason = ""
    return Availability(
        toolset=toolset,
        usable=not reason,
        reason=reason,
        detail=detail if reason == live_reason else "",
        admin_enabled=admin_enabled,
        user_enabled=user_enabled,
        needs_setup=needs_setup,
        has_user_key=bool(user_key),
        has_app_key=bool(app_key),
        user_key_mask=mask(user_key),
        rate_limit_per_minute=admin.rate_limit_per_minute if admin else DEFAULT_RATE_LIMIT,
        settings=settings,
        admin_policy=admin.policy if admin else "",
        api_key=user_key or app_key,
    )
