"""Stress scenarios, schedule and metrics (imported as `evalkit_stress`)."""
