"""Server profiles: resolution order, thinking switches, malformed files, no secrets in manifests."""

from __future__ import annotations

import pytest

from evalkit.config.profiles import (
    DEFAULT_BASE_URL,
    ServerProfile,
    manifest_fields,
    resolve_profile,
    thinking_params,
)
from evalkit.errors import UsageError

CONFIG = """
[servers.after]
base_url = "http://127.0.0.1:8082/v1/"
model = "qwen"
thinking = "chat_template_kwargs"
concurrency = 2
[servers.after.build]
label = "a2bf07fd+pr756"
commit = "a2bf07fd"
env = { FASTLLM_COOPERATIVE_LONG_PREFILL = "1" }

[servers.qwen3]
base_url = "http://127.0.0.1:9000/v1"
thinking = "system_prompt"
"""


@pytest.fixture
def cfg(tmp_path):
    p = tmp_path / "evalkit.toml"
    p.write_text(CONFIG)
    return p


@pytest.mark.parametrize(
    "flag, env, expected",
    [
        (None, {}, DEFAULT_BASE_URL),
        (None, {"OPENAI_BASE_URL": "http://o/v1"}, "http://o/v1"),
        (None, {"OPENAI_BASE_URL": "http://o/v1", "EVALKIT_BASE_URL": "http://e/v1"}, "http://e/v1"),
        ("http://f/v1/", {"EVALKIT_BASE_URL": "http://e/v1"}, "http://f/v1"),
    ],
)
def test_base_url_order(flag, env, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_profile(None, None, flag, None, None, env=env).base_url == expected


def test_named_server_and_flag_override(cfg):
    p = resolve_profile(cfg, "after", None, None, None, env={"EVALKIT_BASE_URL": "http://e/v1"})
    assert p.base_url == "http://127.0.0.1:8082/v1" and p.model == "qwen" and p.concurrency == 2
    p2 = resolve_profile(cfg, "after", "http://x/v1", "other", "MY_KEY", env={})
    assert (p2.base_url, p2.model, p2.api_key_env) == ("http://x/v1", "other", "MY_KEY")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[servers.a\nbase_url = 1", "malformed TOML"),
        ("[servers.a]\nbogus = 1", "unknown key"),
        ("[servers.a]\napi_key = 'sk-123'", "environment variable"),
        ("[servers.a]\nthinking = 'sometimes'", "thinking must be one of"),
        ("servers = 3", "must be a table"),
    ],
)
def test_bad_config_is_a_one_line_usage_error(tmp_path, text, fragment):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(UsageError) as e:
        resolve_profile(p, "a", None, None, None, env={})
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_unknown_server_name(cfg):
    with pytest.raises(UsageError, match="no server named"):
        resolve_profile(cfg, "nope", None, None, None, env={})


@pytest.mark.parametrize(
    "style, mode, body, system",
    [
        ("chat_template_kwargs", "off", {"chat_template_kwargs": {"enable_thinking": False}}, None),
        (
            "chat_template_kwargs",
            "low",
            {"chat_template_kwargs": {"enable_thinking": True, "reasoning_effort": "low"}},
            None,
        ),
        ("reasoning_effort", "high", {"reasoning_effort": "high"}, None),
        ("reasoning_effort", "off", {"reasoning_effort": "none"}, None),
        ("system_prompt", "off", {}, "/no_think"),
        ("system_prompt", "medium", {}, "/think"),
        ("none", "low", {}, None),
        (
            "auto",
            "low",
            {"chat_template_kwargs": {"enable_thinking": True, "reasoning_effort": "low"}, "reasoning_effort": "low"},
            None,
        ),
        ("auto", "off", {"chat_template_kwargs": {"enable_thinking": False}}, None),
    ],
)
def test_thinking_params(style, mode, body, system):
    assert thinking_params(ServerProfile(thinking=style), mode) == (body, system)


def test_manifest_fields_hold_build_but_no_key(cfg):
    p = resolve_profile(cfg, "after", None, None, None, env={"OPENAI_API_KEY": "sk-secret"})
    m = manifest_fields(p)
    assert m["build_label"] == "a2bf07fd+pr756" and m["build"]["commit"] == "a2bf07fd"
    assert "sk-secret" not in repr(m)
