"""Whether two runs served the same model: the one rule every part of the report uses (issue 57).

A run names its model twice over: the id it asked for or the server listed (`manifest.json` `model`), and, where the
server says it, the file it loaded (llama.cpp's `/props` `model_path`, vLLM's and SGLang's `/v1/models` `root`,
SGLang's `/server_info` `model_path`), with llama.cpp's `/v1/models` `meta` (parameters, bytes) beside it. The rule:
- both runs name a file: the same model when the files are the same (the same name, and where both give llama.cpp's
  meta, the same parameters and size), whatever ids the servers gave it (`--alias`, `--served-model-name`, a path
  written otherwise);
- else by the ids, compared as a person reads them: the same when they differ only in case, surrounding space, a
  directory in front or a `.gguf` ending (`/models/Random-8B.gguf` is `random-8b`);
- a run that names neither is not evidence of another model.
`model_groups` puts the runs into models by this rule (a run joins the first group holding a run it matches), and
`ModelNames` gives each run its model's one name (the group's first id, with its file's name beside it where two
models share an id): the grouping of runs into builds, the
builds' settings ("What differs" / "Same in all"), the identity table's model row and its "different models"
warning and the runs table all read it, so the report gives one answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from evalkit.evidence.server_identity import IdentityRecord
from evalkit.runs.json_value import JsonValue


@dataclass(frozen=True)
class ServedModel:
    """What a run's manifest says of its model: the id, the file the server loaded, llama.cpp's meta figures."""

    id: str | None
    file: str | None
    meta: tuple[tuple[str, str], ...] = ()

    @property
    def name(self) -> str | None:
        """How the report names it: the id, else the file's name."""
        return self.id or (_base(self.file) if self.file else None)


def _base(path: str) -> str:
    return PurePosixPath(path.strip().replace("\\", "/").rstrip("/")).name


def _id_key(model_id: str) -> str:
    key = _base(model_id).casefold()
    key = re.sub(r"\.gguf$", "", key)
    return key.strip()


_META_KEYS = ("n_params", "size")


def served_model(manifest: dict[str, JsonValue]) -> ServedModel:
    """The run's model as its manifest records it."""
    raw_id = manifest.get("model")
    model_id = str(raw_id) if raw_id not in (None, "") else None
    ident = IdentityRecord.of(manifest)
    file: str | None = None
    props = ident.props.model_extra if ident.props is not None else None
    if props and isinstance(props.get("model_path"), str) and props["model_path"]:
        file = props["model_path"]
    info = ident.server_info.model_extra if ident.server_info is not None else None
    if file is None and info and isinstance(info.get("model_path"), str) and info["model_path"]:
        file = info["model_path"]
    entries = [m.model_extra or {} for m in ident.models]
    entry = next((e for m, e in zip(ident.models, entries) if _entry_id(m) == model_id), None)
    if entry is None and len(entries) == 1:
        entry = entries[0]
    meta: tuple[tuple[str, str], ...] = ()
    if entry is not None:
        root = entry.get("root")
        if file is None and isinstance(root, str) and root:
            file = root
        m = entry.get("meta")
        if isinstance(m, dict):
            meta = tuple((k, str(m[k])) for k in _META_KEYS if m.get(k) is not None)
    return ServedModel(model_id, file, meta)


def _entry_id(m: Any) -> str | None:
    extra = m.model_extra or {}
    v = extra.get("id")
    return str(v) if v is not None else None


def same_model(a: ServedModel, b: ServedModel) -> bool:
    """The rule (module docstring): by the files where both name one, else by the ids; unknown is not different."""
    if a.file and b.file:
        if _base(a.file) != _base(b.file):
            return False
        common = dict(a.meta).keys() & dict(b.meta).keys()
        return all(dict(a.meta)[k] == dict(b.meta)[k] for k in common)
    if a.id and b.id:
        return _id_key(a.id) == _id_key(b.id)
    return True


def model_groups(models: list[ServedModel]) -> list[int]:
    """Each run's model group (0, 1, ... in order of first appearance): a run joins the first group one of whose
    runs it matches by `same_model`, else starts its own."""
    groups: list[list[ServedModel]] = []
    out = []
    for m in models:
        for i, members in enumerate(groups):
            if any(same_model(m, x) for x in members):
                members.append(m)
                out.append(i)
                break
        else:
            groups.append([m])
            out.append(len(groups) - 1)
    return out


class ModelNames:
    """The runs' models by the one rule: each run's model name (its group's first name), and how many models."""

    def __init__(self, manifests: list[dict[str, JsonValue]]) -> None:
        self.models = [served_model(m) for m in manifests]
        self.groups = model_groups(self.models)
        first: dict[int, ServedModel] = {}
        for g, m in zip(self.groups, self.models):
            if first.get(g) is None or first[g].name is None:
                first[g] = m
        plain = [m.name for m in first.values()]
        names = {  # two models under one id (the reverse case): each with its file's name
            g: f"{m.name} ({_base(m.file)})" if m.file and plain.count(m.name) > 1 else m.name for g, m in first.items()
        }
        self._names = [names.get(g) for g in self.groups]
        self._first_ids = [first[g].id for g in self.groups]

    def name(self, i: int) -> str | None:
        """Run i's model, as the report names it (None when the run records none)."""
        return self._names[i]

    def served_as(self, i: int) -> str | None:
        """Run i's own id where it differs from its model's name (the same model, written otherwise)."""
        own = self.models[i].id
        return own if own and own != self._first_ids[i] else None

    def distinct(self) -> list[str]:
        """Every model's name, once, in order of first appearance (a run with none left out)."""
        return list(dict.fromkeys(n for n in self._names if n))

    def describe(self, i: int) -> str | None:
        """Run i's model for a table cell: its name, and its own id beside it where written otherwise."""
        name, own = self._names[i], self.served_as(i)
        return f"{name} (served as {own})" if name and own else name
