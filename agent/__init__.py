"""The agent loop and its LiteLLM seam. Plain Python: nothing in this package imports Django."""
