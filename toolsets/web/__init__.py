from .tools import toolset

__all__ = ["toolset"]
