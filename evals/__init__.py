"""Capability evals: datasets, prompts, extraction and scoring (imported as `evalkit_evals`)."""
