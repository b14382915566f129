"""Tessera for other programs: an OpenAI-compatible API over its agent loop (`openai`)."""
