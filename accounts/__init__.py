"""Accounts: open sign-up (an admin switch), the user's name, password changes."""
