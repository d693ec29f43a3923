"""Prompt files and the pinned question manifest, shipped as package data (`evalkit_prompts`)."""
