"""gpufleet: the controller-side helpers (pipeline runner entry point)."""

__version__ = "0.1.0"
