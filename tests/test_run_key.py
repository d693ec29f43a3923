"""The API key is read from the environment once per run, kept on the resolved profile, and never shown."""

from __future__ import annotations

import argparse

import pytest

from evalkit.commands.target_flags import profile_from_args, resolve_from_args
from evalkit.config.profiles import manifest_fields
from evalkit.errors import UsageError


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(config=None, server=None, base_url="http://127.0.0.1:9/v1", model=None, **kw)


def test_the_key_is_read_once_and_kept_on_the_run_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H4_KEY", "sk-once")
    args = _args(api_key_env="H4_KEY")
    first = resolve_from_args(args)
    monkeypatch.setenv("H4_KEY", "sk-changed")  # read again anywhere, the run would see a second key
    assert profile_from_args(args) is first and first.api_key == "sk-once"
    assert "sk-once" not in repr(first) and "sk-once" not in repr(manifest_fields(first))


def test_a_named_variable_that_is_unset_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("H4_MISSING", raising=False)
    with pytest.raises(UsageError, match="--api-key-env H4_MISSING"):
        profile_from_args(_args(api_key_env="H4_MISSING"))


def test_the_default_variable_may_be_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert profile_from_args(_args(api_key_env=None)).api_key is None
