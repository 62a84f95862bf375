"""The version of agentkit (the package face re-exports it as ``agentkit.__version__``)."""

__version__ = "0.2.0"
