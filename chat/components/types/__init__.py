"""One module per component type, each exposing `component`; listed in `registry.COMPONENT_MODULES`."""
