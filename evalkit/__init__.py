"""evalkit: before/after speed, capability and latency-under-load checks for OpenAI-compatible LLM servers."""

__version__ = "0.1.0"
