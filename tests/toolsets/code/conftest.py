from tests.toolsets.files.conftest import attach_file

__all__ = ["attach_file"]
