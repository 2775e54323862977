"""evoaudit: execution-grounded audit of self-evolving LLM agents."""

from evoaudit._deferred_imports import defer_agentdojo_pipeline

__version__ = "0.1.0"

defer_agentdojo_pipeline()
