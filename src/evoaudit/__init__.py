"""evoaudit: execution-grounded audit of self-evolving LLM agents."""

__version__ = "0.1.0"
