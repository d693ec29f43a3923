"""examples/evalkit.toml parses and each engine's profile asks for thinking the way that engine reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.config.profiles import load_profiles, thinking_params

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "evalkit.toml"


@pytest.mark.parametrize(
    ("server", "mode", "body", "system"),
    [
        ("llamacpp-smollm2", "low", {}, None),
        ("llamacpp-qwen3", "off", {"chat_template_kwargs": {"enable_thinking": False}}, None),
        (
            "llamacpp-qwen3",
            "high",
            {"chat_template_kwargs": {"enable_thinking": True, "reasoning_effort": "high"}},
            None,
        ),
        ("vllm", "off", {"chat_template_kwargs": {"enable_thinking": False}}, None),
        (
            "vllm",
            "low",
            {"chat_template_kwargs": {"enable_thinking": True, "reasoning_effort": "low"}, "reasoning_effort": "low"},
            None,
        ),
        ("vllm-gpt-oss", "medium", {"reasoning_effort": "medium"}, None),
        ("sglang", "off", {"chat_template_kwargs": {"enable_thinking": False}}, None),
        ("fastllm", "off", {"chat_template_kwargs": {"enable_thinking": False}}, None),
        (
            "fastllm",
            "low",
            {"chat_template_kwargs": {"enable_thinking": True, "reasoning_effort": "low"}, "reasoning_effort": "low"},
            None,
        ),
        ("soft-switch", "off", {}, "/no_think"),
        ("soft-switch", "low", {}, "/think"),
    ],
)
def test_example_profile_thinking_switch(server: str, mode: str, body: dict, system: str | None) -> None:
    profiles = load_profiles(EXAMPLE)
    assert thinking_params(profiles[server], mode) == (body, system)


def test_example_profiles_cover_the_four_engines_on_loopback() -> None:
    profiles = load_profiles(EXAMPLE)  # rejects an `api_key` entry, so no key can sit in the example
    assert {"llamacpp-smollm2", "vllm", "sglang", "fastllm"} <= set(profiles)
    for prof in profiles.values():
        assert prof.base_url.startswith("http://127.0.0.1:")
