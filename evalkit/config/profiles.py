"""Server profiles from `evalkit.toml`: where a server is, how it switches thinking, and its build label.

```toml
[servers.after]
base_url = "http://127.0.0.1:8082/v1"
model = "qwen38-27b-ud"            # optional: default is the first id /v1/models lists
api_key_env = "OPENAI_API_KEY"     # the *name* of the variable; keys never go in this file
thinking = "chat_template_kwargs"  # auto | reasoning_effort | chat_template_kwargs | system_prompt | none
concurrency = 2                    # default --concurrency for capability
extra_body = { cache_prompt = false }
[servers.after.build]               # free metadata, recorded in every run's manifest
label = "a2bf07fd+revert+pr756"
commit = "a2bf07fd"
flags = "--tp 2 --max_batch 2"
env = { FASTLLM_COOPERATIVE_LONG_PREFILL = "1" }
[servers.after.log_patterns]        # extra --server-log flags by name (regex); "" switches a default off
decode_alive = 'Decode alive = \\d+'
```
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from evalkit.config.config_file import THINKING_STYLES, ConfigFile
from evalkit.errors import UsageError
from evalkit.runs.json_value import JsonValue
from evalkit.runs.schemas import validate

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_CONFIG = "evalkit.toml"
THINKING_MODES = ("off", "low", "medium", "high")


@dataclass(frozen=True)
class ServerProfile:
    """One server as the config file (or plain flags) describe it."""

    name: str | None = None
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    thinking: str = "auto"
    thinking_on_prompt: str = "/think"
    thinking_off_prompt: str = "/no_think"
    concurrency: int | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    build: dict[str, Any] = field(default_factory=dict)
    log_patterns: dict[str, str] = field(default_factory=dict)  # --server-log flags: name -> regex ("" = off)
    # The key itself, read once from `api_key_env` by `resolve_profile` when a command starts; never shown (repr),
    # never written (manifest_fields names what a run records).
    api_key: str | None = field(default=None, repr=False, compare=False)


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file; a missing or malformed file is a usage error with a one-line reason."""
    try:
        with open(path, "rb") as f:
            data: dict[str, Any] = tomllib.load(f)
            return data
    except FileNotFoundError:
        raise UsageError(f"file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"malformed TOML in {path}: {str(e).splitlines()[0]}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None


def load_profiles(path: Path | None) -> dict[str, ServerProfile]:
    """Profiles by name from a config file (`evalkit.toml` in the working directory when `path` is None)."""
    if path is None:
        path = Path(DEFAULT_CONFIG)
        if not path.exists():
            return {}
    data = read_toml(Path(path))
    servers = data.get("servers", {})
    if not isinstance(servers, dict):
        raise UsageError(f"{path}: [servers] must be a table of named servers")
    out = {}
    for name, raw in servers.items():
        out[name] = _profile_from_table(path, name, raw)
    validate(ConfigFile, data, path)  # what the checks above do not name: wrong types, bad numbers, top-level keys
    return out


def _profile_from_table(path: Path, name: str, raw: Any) -> ServerProfile:
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: servers.{name} must be a table")
    if "api_key" in raw:
        raise UsageError(f"{path}: put the key in an environment variable and name it with api_key_env")
    known = set(ServerProfile.__dataclass_fields__) - {"name"}
    unknown = set(raw) - known
    if unknown:
        raise UsageError(f"{path}: servers.{name} has unknown key(s): {', '.join(sorted(unknown))}")
    thinking = raw.get("thinking", "auto")
    if thinking not in THINKING_STYLES:
        raise UsageError(f"{path}: servers.{name}.thinking must be one of {', '.join(THINKING_STYLES)}")
    return ServerProfile(name=name, **raw)


def masked_url(url: str) -> str:
    """`url` with the userinfo of its host part (`http://user:PASSWORD@host`: a password, or a token as the user
    name) replaced by `***`."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "the URL given" if "@" in url else url
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


def refuse_userinfo(url: str) -> None:
    """A base URL with a user name or password in it: refused (UsageError), the password never shown. evalkit
    sends the key as a bearer token; a password in the URL would be sent nowhere and printed everywhere."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        has = parts.username is not None or parts.password is not None
    except ValueError:
        has = "@" in url
    if has:
        raise UsageError(
            f"base URL {masked_url(url)} holds a user name or password; evalkit sends no credentials from a URL: "
            "drop them, and give a key with --api-key-env NAME (evalkit sends it in the Authorization header)"
        )


def refuse_unsendable_key(variable: str, key: str | None) -> None:
    """A key with a line break or another control character: refused (UsageError), never printed. An HTTP header
    cannot carry it (a key read from a file often ends in a line break)."""
    if key is not None and any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in key):
        raise UsageError(
            f"the key in ${variable} holds a line break or another control character, which no HTTP header can "
            "carry; set the variable to the key alone"
        )


def resolve_profile(
    config: Path | None,
    server: str | None,
    base_url: str | None,
    model: str | None,
    api_key_env: str | None,
    env: dict[str, str] | None = None,
) -> ServerProfile:
    """The profile a command uses: `--server NAME` from the config, overridden by explicit flags."""
    env = dict(os.environ) if env is None else env
    profiles = load_profiles(config)
    if server is not None:
        if server not in profiles:
            where = config or DEFAULT_CONFIG
            raise UsageError(f"no server named {server!r} in {where} (known: {', '.join(profiles) or 'none'})")
        prof = profiles[server]
    else:
        prof = ServerProfile()
    url = base_url or prof.base_url or env.get("EVALKIT_BASE_URL") or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    refuse_userinfo(url)
    key = env.get(api_key_env or prof.api_key_env)
    refuse_unsendable_key(api_key_env or prof.api_key_env, key)
    return ServerProfile(
        **{
            **prof.__dict__,
            "base_url": url.rstrip("/"),
            "model": model or prof.model,
            "api_key_env": api_key_env or prof.api_key_env,
            "api_key": env.get(api_key_env or prof.api_key_env),
        }
    )


class ThinkingKwargs(TypedDict, total=False):
    """A thinking body's `chat_template_kwargs`: the template's switch and, on, the effort asked."""

    enable_thinking: bool
    reasoning_effort: str


class ThinkingBody(TypedDict, total=False):
    """What a request adds to its body to ask for a thinking mode (`thinking_params`), in the order sent."""

    chat_template_kwargs: ThinkingKwargs
    reasoning_effort: str


def thinking_params(profile: ServerProfile, mode: str) -> tuple[ThinkingBody, str | None]:
    """(extra request body, system prompt or None) that ask this server for thinking `mode`."""
    if mode not in THINKING_MODES:
        raise UsageError(f"--thinking must be one of {', '.join(THINKING_MODES)}")
    on = mode != "off"
    style = profile.thinking
    if style == "none":
        return {}, None
    if style == "system_prompt":
        return {}, profile.thinking_on_prompt if on else profile.thinking_off_prompt
    if style == "reasoning_effort":
        return {"reasoning_effort": mode if on else "none"}, None
    kwargs: ThinkingKwargs = {"enable_thinking": on}
    if on:
        kwargs["reasoning_effort"] = mode
    body: ThinkingBody = {"chat_template_kwargs": kwargs}
    if style == "auto" and on:
        # vLLM, SGLang and gpt-oss style templates read the top-level field; Qwen3-style templates the kwargs.
        body["reasoning_effort"] = mode
    return body, None


def manifest_fields(profile: ServerProfile) -> dict[str, JsonValue]:
    """What a run records about its server: everything but secrets."""
    build = dict(profile.build)
    return {
        "server": {
            "name": profile.name,
            "base_url": profile.base_url,
            "api_key_env": profile.api_key_env,
            "thinking_style": profile.thinking,
            "extra_body": profile.extra_body,
        },
        "model": profile.model,
        "build_label": build.pop("label", None) or profile.name,
        "build": build,
    }
