"""Which server build a run measured: what the server says about itself, plus what the user says about it.

Probed once per run, each endpoint optional: llama.cpp `GET /props` (build_info, total_slots, n_ctx), vLLM
`GET /version`, SGLang `GET /server_info` (older: `/get_server_info`), and the extra fields of `GET /v1/models`
entries (vLLM's `max_model_len`, llama.cpp's `meta`). The user's `--build-label` and `--build-info KEY=VALUE`
extend the profile's `[servers.X.build]` table. Reports label runs from this and flag before/after model changes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, JsonValue

from evalkit.client import auxiliary
from evalkit.client.identity_json import PropsIdentity, ServerIdentity
from evalkit.errors import UsageError
from evalkit.evidence.server_metrics import metrics_url
from evalkit.redact import scrub_tree

_STANDARD_MODEL_KEYS = {"id", "object", "created", "owned_by"}
# SGLang's /server_info is every server argument; these are the ones that identify a build and its capacity.
_SGLANG_KEYS = (
    "version",
    "model_path",
    "served_model_name",
    "tp_size",
    "dp_size",
    "context_length",
    "max_total_num_tokens",
    "max_running_requests",
    "chunked_prefill_size",
    "mem_fraction_static",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_num_draft_tokens",
    "speculative_eagle_topk",
    "speculative_draft_model_path",
    "kv_cache_dtype",
    "quantization",
    "attention_backend",
    "enable_mixed_chunk",
    "schedule_policy",
)
_MAX_TEXT = 300


def apply_build_args(fields: dict[str, Any], label: str | None, info: Sequence[str]) -> dict[str, Any]:
    """Manifest fields with `--build-label` replacing the label and each `--build-info KEY=VALUE` added to `build`."""
    build = dict(fields.get("build") or {})
    for item in info:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--build-info wants KEY=VALUE, got {item!r}")
        build[key.strip()] = value
    out = {**fields, "build": build}
    if label:
        out["build_label"] = label
    return out


def _root(base_url: str) -> str:
    return metrics_url(base_url)[: -len("/metrics")]


def _short(value: Any) -> Any:
    # A chat template or a long model path is identity noise in a manifest; keep its start.
    if isinstance(value, str) and len(value) > _MAX_TEXT:
        return value[:_MAX_TEXT] + f"... ({len(value)} chars)"
    return value


async def _get_json(session: auxiliary.ClientSession, url: str, timeout_s: float) -> tuple[Any, str]:
    try:
        async with session.get(url, timeout=auxiliary.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                return None, f"HTTP {resp.status}"
            try:
                return await auxiliary.read_json(resp), "ok"
            except ValueError as e:
                return None, f"not usable: {e}" if "nested deeper" in str(e) else "not JSON"
    except auxiliary.BodyTooLarge as e:
        return None, f"not usable: {e}"
    except (auxiliary.ClientError, asyncio.TimeoutError, OSError) as e:
        return None, type(e).__name__


def _from_props(props: dict[str, Any]) -> PropsIdentity:
    gen = props.get("default_generation_settings")
    gen = gen if isinstance(gen, dict) else {}
    return {
        "build_info": props.get("build_info"),
        "total_slots": props.get("total_slots"),
        "n_ctx": gen.get("n_ctx", props.get("n_ctx")),
        "model_path": _short(props.get("model_path")),
        "modalities": props.get("modalities"),
    }


def _from_models(page: Any) -> list[dict[str, JsonValue]]:
    data = page.get("data") if isinstance(page, dict) else None
    out: list[dict[str, JsonValue]] = []
    for m in data or []:
        if isinstance(m, dict):
            extra = {k: _short(v) for k, v in m.items() if k not in _STANDARD_MODEL_KEYS}
            out.append({"id": m.get("id"), **extra})
    return out


async def identify(base_url: str, headers: dict[str, str] | None = None, timeout_s: float = 5.0) -> ServerIdentity:
    """`server_identity` for manifest.json: what each identity endpoint answered, and the server type it implies."""
    root = _root(base_url)
    out: ServerIdentity = {"server_type": None, "probed": {}}
    # The key these requests carry, scrubbed from every answer before any value of it is cut to `_MAX_TEXT`.
    secrets = [v.split()[-1] for k, v in (headers or {}).items() if k.lower() == "authorization" and v.split()]
    async with auxiliary.session(headers) as session:

        async def get(url: str) -> tuple[Any, str]:
            value, how = await _get_json(session, url, timeout_s)
            return scrub_tree(value, secrets), how

        props, out["probed"]["/props"] = await get(root + "/props")
        if isinstance(props, dict) and ("default_generation_settings" in props or "total_slots" in props):
            out["server_type"] = "llama.cpp"
            out["props"] = _from_props(props)
        version, out["probed"]["/version"] = await get(root + "/version")
        if isinstance(version, dict) and "version" in version:
            out["version"] = version.get("version")
            out["server_type"] = out["server_type"] or "vllm"
        if out["server_type"] is None:
            info, out["probed"]["/server_info"] = await get(root + "/server_info")
            if not isinstance(info, dict):
                info, out["probed"]["/get_server_info"] = await get(root + "/get_server_info")
            if isinstance(info, dict) and ("model_path" in info or "tp_size" in info):
                out["server_type"] = "sglang"
                out["server_info"] = {k: _short(info[k]) for k in _SGLANG_KEYS if k in info}
                states = info.get("internal_states")
                if isinstance(states, list) and states and isinstance(states[0], dict):
                    # Cumulative since start-up: it includes traffic from before this run.
                    out["server_info"]["avg_spec_accept_length"] = states[0].get("avg_spec_accept_length")
        models, out["probed"]["/v1/models"] = await get(base_url.rstrip("/") + "/models")
        out["models"] = _from_models(models)
        out["owned_by"] = (
            sorted(
                {
                    str(m.get("owned_by"))
                    for m in (models or {}).get("data") or []
                    if isinstance(m, dict) and m.get("owned_by")
                }
            )
            if isinstance(models, dict)
            else []
        )
        if "evalkit-sim" in out["owned_by"]:
            # The sim says what it was launched as (its profile and every option): its build, for a resume's check.
            config, out["probed"]["/sim/config"] = await get(root + "/sim/config")
            if isinstance(config, dict):
                out["launch_options"] = {str(k): _short(v) for k, v in config.items()}
        if out["server_type"] is None:
            # A FastAPI server's routes tell llama-cpp-python and transformers serve apart
            # (evalkit.evidence.server_kind).
            api, out["probed"]["/openapi.json"] = await get(root + "/openapi.json")
            if isinstance(api, dict) and isinstance(api.get("paths"), dict):
                out["openapi"] = {
                    "title": _short(api["info"].get("title") if isinstance(api.get("info"), dict) else None),
                    "paths": sorted(p for p in api["paths"] if p in _TELLING_PATHS),
                }
    return out


# Routes whose presence or absence tells servers apart.
_TELLING_PATHS = {
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/audio/transcriptions",
    "/tokenize",
    "/extras/tokenize",
    "/version",
    "/metrics",
    "/props",
    "/health",
}


Scalar = str | int | float | bool | None  # as the server said it (a number stays a number)


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class ServerProps(_Record):
    """What a manifest's identity keeps of llama.cpp's /props."""

    build_info: Scalar = None
    total_slots: Scalar = None
    n_ctx: Scalar = None


class ServerInfo(_Record):
    """What a manifest's identity keeps of a server's own info endpoint (e.g. transformers serve)."""

    version: Scalar = None
    context_length: Scalar = None


class ServedModel(_Record):
    """One entry of /v1/models as the identity keeps it."""

    max_model_len: Scalar = None


class IdentityRecord(_Record):
    """A manifest's `server_identity` as a reader shows it: what the server said it is, from a run of any evalkit
    version (an older run wrote it as a JSON string)."""

    server_type: Scalar = None
    version: Scalar = None
    props: ServerProps | None = None
    server_info: ServerInfo | None = None
    models: list[ServedModel] = []

    @classmethod
    def of(cls, manifest: dict[str, Any]) -> IdentityRecord:
        """The manifest's identity (an empty one when it has none or an unreadable string)."""
        ident = manifest.get("server_identity")
        if isinstance(ident, str):
            try:
                ident = json.loads(ident)
            except ValueError:
                ident = None
        if not isinstance(ident, dict):
            return cls()
        from evalkit.runs.schemas import validate

        return cast(IdentityRecord, validate(cls, ident, "manifest.json server_identity"))

    def version_text(self) -> Scalar:
        """The version, else /props' build info, else the info endpoint's version."""
        return (
            self.version
            or (self.props.build_info if self.props else None)
            or (self.server_info.version if self.server_info else None)
        )

    def context_length(self) -> Scalar:
        """The context the server was started with: /props' n_ctx, the info endpoint's, or a model's max length."""
        return (
            (self.props.n_ctx if self.props else None)
            or (self.server_info.context_length if self.server_info else None)
            or next((m.max_model_len for m in self.models if m.max_model_len), None)
        )


def identity_label(manifest: dict[str, Any]) -> str:
    """One line naming the build: label, server type and version or build info, model."""
    ident = IdentityRecord.of(manifest)
    parts = [str(manifest.get("build_label") or "")]
    kind = ident.server_type
    ver = ident.version_text()
    if kind:
        parts.append(f"{kind} {ver}" if ver else str(kind))
    if manifest.get("model"):
        parts.append(str(manifest["model"]))
    return " · ".join(p for p in parts if p)
