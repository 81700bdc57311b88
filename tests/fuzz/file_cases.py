"""Chip files and Hugging Face config.json: copies of the catalog's chips/*.toml and of
tests/fixtures/hf_configs/*.json with values replaced (wrong types, inf/nan, huge, negative, zero,
empty, markup, unicode digits), keys deleted or added, or the text broken; each passed to a command
(``--chip FILE.toml``, ``--catalog``, ``rooftop model/train/serve config.json``)."""

from __future__ import annotations

import json
import math
import random
import re
import tomllib
from typing import Any

from tests.fuzz import hostile
from tests.fuzz.cli_cases import CHIP_DIR, HF_DIR, SMALL_HLO, VALID
from tests.fuzz.oracle import Case

INF = float("inf")
TOML_VALUES: tuple[Any, ...] = (
    INF, -INF, math.nan, 0, -1, 0.0, -0.5, 1e308, 5e-324, 2**63 - 1, -(2**63), 10**30, "", "abc", "80 ZiB",
    "1e400 GiB", "²GiB", "inf GiB", "-5 GiB", "nan", "1²", "٣ TB/s", "[/bold]", "[red on white blink]ALERT[/]",
    True, False, [], [1, 2], [INF], [0], [-1], [1e308], [2**62], ["x"], {}, {"value": INF}, {"value": "x"},
    {"source": "s"}, {"value": [1]}, "x" * 10000,
)  # fmt: skip
HF_VALUES: tuple[Any, ...] = (
    1e15, 2**63, 10**30, -1, 0, 0.5, 1.5, "2x", "8", None, True, False, [], {}, math.nan, INF, -INF, 1e308, "²",
    "[/bold]", 1e12, 2**31, 3, 7, 10**9, [1, 2], ["x"], {"type": "linear", "factor": INF}, "x" * 10000,
)  # fmt: skip
HF_KEYS = ("num_attention_heads", "num_key_value_heads", "head_dim", "num_hidden_layers", "hidden_size",
           "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window", "sliding_window_pattern",
           "layer_types", "num_local_experts", "num_experts_per_tok", "n_routed_experts", "n_shared_experts",
           "moe_intermediate_size", "first_k_dense_replace", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim",
           "qk_nope_head_dim", "v_head_dim", "tie_word_embeddings", "torch_dtype", "hidden_act", "architectures",
           "model_type", "rope_scaling", "quantization_config", "text_config", "query_pre_attn_scalar",
           "attention_bias", "mlp_bias", "use_sliding_window", "max_window_layers", "num_experts",
           "topk_group")  # fmt: skip

CHIP_KEYS = ("name", "kind", "aliases", "value", "domain_sizes", "max_chips", "wraparound", "schema_version", "bf16",
             "fp8", "hbm_bytes")  # fmt: skip


# ----------------------------------------------------------------------------------------------------
# TOML written back (tomllib only reads)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_str(key)


def _toml_str(text: str) -> str:
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_str(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(type(value).__name__)


def dump_toml(doc: dict[str, Any]) -> str:
    """Top-level values, then one [table] per table (deeper tables inline)."""
    lines = [f"{_toml_key(k)} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for key, table in doc.items():
        if isinstance(table, dict):
            lines += ["", f"[{_toml_key(key)}]"] + [f"{_toml_key(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path in a nested dict/list document."""
    out: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


def mutate_doc(rng: random.Random, doc: dict[str, Any], values: tuple[Any, ...], keys: tuple[str, ...]) -> list[str]:
    """Replace, delete or add values in a nested document, in place; what was done."""
    what = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        paths = _paths(doc)
        roll = rng.random()
        if roll < 0.65 and paths:
            path = rng.choice(paths)
            value = rng.choice(values) if rng.random() < 0.8 else hostile.number(rng)
            _parent(doc, path)[path[-1]] = json.loads(json.dumps(value))  # a fresh copy
            what.append(f"{'.'.join(map(str, path))} = {_said(value)}")
        elif roll < 0.8 and paths:
            path = rng.choice(paths)
            parent = _parent(doc, path)
            if isinstance(parent, dict):
                del parent[path[-1]]
                what.append(f"deleted {'.'.join(map(str, path))}")
        else:
            tables = [doc] + [_parent(doc, (*p, None)) for p in paths if isinstance(_parent(doc, (*p, None)), dict)]
            table = rng.choice(tables)
            key = rng.choice(keys)
            table[key] = json.loads(json.dumps(rng.choice(values)))
            what.append(f"added {key} = {_said(table[key])}")
    return what


def _said(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 40 else f"{text[:20]}...({len(text)} chars)"


def _break_text(rng: random.Random, text: str) -> tuple[str, str]:
    lines = text.split("\n")
    roll = rng.randrange(4)
    i = rng.randrange(len(lines))
    if roll == 0:
        del lines[i]
        return "\n".join(lines), f"line {i + 1} deleted"
    if roll == 1:
        lines.insert(rng.randrange(len(lines)), lines[i])
        return "\n".join(lines), f"line {i + 1} repeated"
    if roll == 2:
        at = rng.randrange(len(text) + 1)
        token = rng.choice(["[", "]", "=", '"', "{", "}", ",", "\x00", "²", "\\", "[[", "inf", "\n["])
        return text[:at] + token + text[at:], f"inserted {token!r}"
    return text[: rng.randrange(len(text) + 1)], "cut"


# ----------------------------------------------------------------------------------------------------
# cases


def _chip_commands(rng: random.Random, chip: str) -> list[str]:
    """A command that reads the chip file."""
    return rng.choice([
        ["chips", "--catalog", chip],
        ["chips", "fuzzchip", "--catalog", chip],
        ["roofline", "--chip", chip, "--flops", "1e12", "--bytes", "1GiB", "--dtype", rng.choice(VALID["dtype"])],
        ["matmul", "A[B,D] @ W[D,F]", "--dims", "B=4096,D=8192,F=8192", "--chip", chip],
        ["collective", rng.choice(VALID["kind"]), "--chip", chip, "--topology", rng.choice(["4x4", "8", "2x8", "16x8"]),
         "--axes", "X", "--bytes", "1MiB"],
        ["train", "llama-3-8b", "--chip", chip, "--chips", rng.choice(["8", "64"]), "--batch-tokens", "1M",
         "--seq-len", "4096"],
        ["serve", "llama-3-8b", "--chip", chip, "--chips", rng.choice(["1", "8"]), "--prompt-len", "1024",
         "--gen-len", "128"],
        ["hlo", "{W}/m.hlo", "--chip", chip],
        ["models", "--catalog", chip],
    ])  # fmt: skip


def chip_case(rng: random.Random) -> Case:
    """A catalog chip file with a few values replaced (or its text broken), used by some command."""
    path = rng.choice(sorted(CHIP_DIR.glob("*.toml")))
    text = path.read_text()
    doc = tomllib.loads(text)
    if rng.random() < 0.5:
        doc["name"], doc["aliases"] = "fuzzchip", []
    if rng.random() < 0.85:
        what = mutate_doc(rng, doc, TOML_VALUES, CHIP_KEYS)
        text = dump_toml(doc)
    else:
        text, said = _break_text(rng, text)
        what = [said]
    argv = _chip_commands(rng, "{W}/chip.toml")
    case = Case(
        "chip", argv, {"chip.toml": text.encode("utf-8", "surrogatepass")}, label=f"{path.name}: " + "; ".join(what)
    )
    case.main_file = "chip.toml"
    if "{W}/m.hlo" in argv:
        case.files["m.hlo"] = SMALL_HLO
    if rng.random() < 0.5:
        case.argv.append("--json")
    return case


def config_case(rng: random.Random) -> Case:
    """A Hugging Face config.json with a few values replaced, keys deleted or added, run through
    ``rooftop model`` (mostly), ``train`` or ``serve``."""
    path = rng.choice(sorted(HF_DIR.glob("*.json")))
    doc = json.loads(path.read_text())
    if rng.random() < 0.9:
        what = mutate_doc(rng, doc, HF_VALUES, HF_KEYS)
        text = json.dumps(doc, indent=1)
    else:
        text, said = _break_text(rng, path.read_text())
        what = [said]
    roll = rng.random()
    if roll < 0.6:
        argv = ["model", "{W}/config.json"] + (["--seq-len", rng.choice(VALID["seq"])] if rng.random() < 0.3 else [])
    elif roll < 0.8:
        argv = ["train", "{W}/config.json", "--chip", "h100", "--chips", rng.choice(["8", "64"]), "--batch-tokens",
                "1M", "--seq-len", "2048"]  # fmt: skip
    else:
        argv = ["serve", "{W}/config.json", "--chip", rng.choice(["h100", "tpu-v5e"]), "--chips",
                rng.choice(["1", "8"]), "--prompt-len", "512", "--gen-len", "64"]  # fmt: skip
    if rng.random() < 0.5:
        argv.append("--json")
    data = text.encode("utf-8", "surrogatepass")
    return Case(
        "config", argv, {"config.json": data}, label=f"{path.name}: " + "; ".join(what), main_file="config.json"
    )
