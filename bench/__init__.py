"""Tessera's message-path benchmark (issue 6): see bench/run.py and bench/RESULTS.md."""
