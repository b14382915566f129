"""Workspace (sample data): each user's own projects, tasks, calendar, email, meetings and post
drafts, so Tessera can be tried offline and rich cards have real data.

This package is a Django app, so it must not import its models at import time; the registry
loads the toolset from `toolsets.workspace.tools`.
"""
