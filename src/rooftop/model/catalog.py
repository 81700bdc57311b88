"""Model catalog: load and look up TransformerConfigs from data files.

- Built-in models: ``catalog/models/*.toml`` (one model per file: name, aliases, the source
  of the architecture, published figures with their sources, and an ``[architecture]``
  table of TransformerConfig fields).
- A Hugging Face ``config.json`` (any path ending in .json, or a model's folder holding one):
  imported by model/hf.py; read with ``json.load`` only, nothing is executed.
- A user TOML of the catalog schema (any path ending in .toml).
- The book's letters (``--dims D=...,F=...``): ``config_from_dims``.

``config_from_dict`` builds a config from an ``[architecture]`` table and ``config_to_dict`` is its inverse.

Lookup is case-insensitive over names and aliases (spaces, dots and dashes ignored); an
unknown name raises UnknownNameError with close matches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rooftop.catalog.io import builtin_tomls, is_directory, read_toml_file
from rooftop.errors import InvalidConfigError, UnknownNameError, shown
from rooftop.model.blocks import LinearAttentionConfig, MLAConfig, MoEConfig, SSMConfig
from rooftop.model.config import TransformerConfig
from rooftop.model.hf import load_hf_config
from rooftop.reasons import Option, OptionError
from rooftop.units import MAX_QUANTITY

#: longest model name or alias, and most aliases of a catalog-schema file
MAX_NAME = 200
MAX_ALIASES = 64


@dataclass(frozen=True)
class PublishedFigure:
    """A published number about a model (e.g. its parameter count) and where it is stated."""

    value: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class ModelEntry:
    """One catalog model: its config plus what the catalog says about it."""

    config: TransformerConfig
    aliases: tuple[str, ...] = ()
    description: str = ""
    published: Mapping[str, PublishedFigure] = field(default_factory=lambda: MappingProxyType({}))
    path: str = ""

    @property
    def name(self) -> str:
        return self.config.name


def _published(data: Any, where: str) -> dict[str, PublishedFigure]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise InvalidConfigError(f"{where}: [published] must be a table")
    out = {}
    for key, node in data.items():
        if not isinstance(node, Mapping) or "value" not in node or not str(node.get("source", "")).strip():
            raise InvalidConfigError(f'{where}: published.{shown(key)} must be {{value = ..., source = "..."}}')
        value = node["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= MAX_QUANTITY:
            raise InvalidConfigError(f"{where}: published.{shown(key)} value {shown(value)} must be a finite number")
        out[key] = PublishedFigure(float(value), str(node["source"]), str(node.get("note", "")))
    return out


def entry_from_dict(data: Mapping[str, Any], where: str = "<model>") -> ModelEntry:
    """Build and validate a ModelEntry from a parsed catalog TOML; errors name the file and field."""
    for key in ("name", "source"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise InvalidConfigError(f"{where}: field {key} is missing or not a string (every model needs one)")
    if len(data["name"]) > MAX_NAME:
        raise InvalidConfigError(f"{where}: field name is longer than {MAX_NAME} characters")
    arch = data.get("architecture")
    if not isinstance(arch, Mapping):
        raise InvalidConfigError(f"{where}: table [architecture] is missing")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and len(a) <= MAX_NAME for a in aliases):
        raise InvalidConfigError(f"{where}: field 'aliases' must be a list of strings of at most {MAX_NAME} characters")
    if len(aliases) > MAX_ALIASES:
        raise InvalidConfigError(f"{where}: field 'aliases' has {len(aliases):,} names; at most {MAX_ALIASES}")
    cfg = config_from_dict(arch, data["name"], data["source"], where)
    return ModelEntry(
        cfg,
        tuple(aliases),
        str(data.get("description", "")),
        MappingProxyType(_published(data.get("published"), where)),
        where,
    )


def load_model_file(path: str | Path) -> ModelEntry:
    return entry_from_dict(read_toml_file(path, "model"), str(path))


@lru_cache(maxsize=1)
def load_models() -> tuple[ModelEntry, ...]:
    """Every built-in model, in file-name order."""
    return tuple(entry_from_dict(data, where) for where, data in builtin_tomls("models"))


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def get_entry(name: str) -> ModelEntry:
    """A catalog entry by name or alias; a path ending in .toml is loaded as one."""
    if name.endswith(".toml"):
        return load_model_file(name)
    key = _norm(name)
    entries = load_models()
    for entry in entries:
        if key == _norm(entry.name) or any(key == _norm(a) for a in entry.aliases):
            return entry
    raise UnknownNameError(
        "model",
        name,
        [e.name for e in entries],
        "or give the path of a Hugging Face config.json (or of the model's folder holding one)",
    )


def get_model(name: str) -> TransformerConfig:
    """A TransformerConfig from a catalog name or alias, a catalog-schema .toml file or a
    Hugging Face config.json (a path ending in .json)."""
    if name.endswith(".json"):
        return load_hf_config(name)
    if "/" in name and is_directory(name):  # a folder holding config.json (a catalog name has no '/')
        return load_hf_config(name)
    return get_entry(name).config


_SUBS = {"moe": MoEConfig, "mla": MLAConfig, "linear": LinearAttentionConfig, "ssm": SSMConfig}
_SCALARS = {f.name for f in dataclasses.fields(TransformerConfig)} - {*_SUBS, "name", "source"}


def _sub(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidConfigError(f"{where}: must be a table")
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InvalidConfigError(
            f"{where}: unknown field(s) {shown(', '.join(unknown))} (valid: {', '.join(sorted(names))})"
        )
    try:
        return cls(**data)
    except TypeError as exc:
        raise InvalidConfigError(f"{where}: {exc}") from None


def config_from_dict(data: Mapping[str, Any], name: str, source: str = "", where: str = "<model>") -> TransformerConfig:
    """Build a TransformerConfig from a plain table (a catalog file's ``[architecture]``);
    unknown keys are errors, so a typo never falls back to a default silently."""
    unknown = sorted(set(data) - _SCALARS - set(_SUBS))
    if unknown:
        raise InvalidConfigError(
            f"{where}: unknown architecture field(s) {shown(', '.join(unknown))}"
            f" (valid: {', '.join(sorted(_SCALARS | set(_SUBS)))})"
        )
    kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in _SCALARS}
    for key, cls in _SUBS.items():
        kwargs[key] = _sub(cls, data[key], f"{where}: [{key}]") if key in data else None
    try:
        return TransformerConfig(name=name, source=source, **kwargs)
    except TypeError as exc:
        raise InvalidConfigError(f"{where}: {exc}") from None


def config_to_dict(cfg: TransformerConfig) -> dict[str, Any]:
    """The inverse of ``config_from_dict`` (for JSON output): every field, sub-tables as dicts."""
    out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.name not in _SUBS}
    out["attention_pattern"] = list(cfg.attention_pattern)
    out["ffn_pattern"] = list(cfg.ffn_pattern)
    for key in _SUBS:
        sub = getattr(cfg, key)
        out[key] = dataclasses.asdict(sub) if sub else None
    return out


#: ``--dims`` letters (the book's Part 4 notation) -> TransformerConfig fields; D, F, L, N, V required
DIM_FIELDS = {"D": "d_model", "F": "d_ff", "L": "n_layers", "N": "n_heads", "K": "n_kv_heads", "H": "head_dim",
              "V": "vocab_size"}  # fmt: skip
_DIMS_REQUIRED = ("D", "F", "L", "N", "V")


def config_from_dims(dims: Mapping[str, int], max_seq_len: int = 1 << 20) -> TransformerConfig:
    """A dense decoder from the book's letters ("How to Scale Your Model", Part 4 notation: D d_model,
    F the MLP width, L layers, N query heads, K key/value heads (default N), H head dim (default D / N),
    V vocabulary): a gated MLP (three D x F matrices, as Part 4 counts), untied embeddings, no biases."""
    unknown = sorted(set(dims) - set(DIM_FIELDS))
    if unknown:
        raise OptionError(
            Option("dims"),
            f" names {shown(', '.join(unknown))}; the letters are {', '.join(DIM_FIELDS)} "
            "(D model width, F MLP width, L layers, N heads, K kv heads, H head dim, V vocabulary)",
        )
    missing = [k for k in _DIMS_REQUIRED if k not in dims]
    if missing:
        raise OptionError(
            Option("dims"),
            f" gives no {', '.join(missing)} (needed: D, F, L, N, V; K and H optional), e.g. ",
            Option("dims"),
            " D=8192,F=28672,L=80,N=64,K=8,H=128,V=128256",
        )
    text = ",".join(f"{k}={v}" for k, v in dims.items())
    fields = {DIM_FIELDS[k]: v for k, v in dims.items()}
    return TransformerConfig(
        name=f"dims({text})",
        source=f"dims {text}",
        max_seq_len=max_seq_len,
        **fields,  # type: ignore[arg-type]
    )
