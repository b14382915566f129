"""Shared infrastructure that both the chat app and the toolsets import (and that imports
neither): secret redaction and strict parsing of untrusted JSON."""
