"""A chat message as the sim reads it from a request's `messages` (OpenAI's chat format)."""

from __future__ import annotations

from typing import TypedDict


class ContentPart(TypedDict, total=False):
    """One part of a list-of-parts `content` (the sim reads the text parts)."""

    type: str
    text: str


class ChatMessage(TypedDict, total=False):
    """One entry of a request's `messages`: its role and content (text, or a list of parts)."""

    role: str
    content: str | list[ContentPart] | None
