"""A model's layers as runs of identical layers (``LayerGroup``): the mixer block and the feed-forward block
each layer has, counted in closed form from the config's patterns; every planner prices a group once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from rooftop.model.config import ATTENTION_MIXERS, TransformerConfig


@dataclass(frozen=True)
class LayerGroup:
    """``count`` identical layers: the mixer block (ATTENTION_KINDS; ``window`` its keys for a
    sliding-window or chunked layer, 0 for global attention) and the feed-forward block (``moe``;
    ``mlp`` False: no feed-forward)."""

    name: str
    count: int
    moe: bool
    window: int
    first: int  # index of the first layer of the group
    mixer: str = "global"
    mlp: bool = True

    @property
    def attends(self) -> bool:
        """Whether the mixer attends over a KV cache that grows with the context."""
        return self.mixer in ATTENTION_MIXERS

    @property
    def stateful(self) -> bool:
        """Whether the mixer keeps a constant-size recurrent state per sequence (linear attention, SSM)."""
        return self.mixer in ("linear", "ssm", "hybrid")


def _group_name(cfg: TransformerConfig, mixer: str, ffn: str) -> str:
    """ "dense"/"moe", with the mixer appended when the model has more than one kind of mixer or
    sliding-window layers ("dense-local", "moe-linear"); a layer without a feed-forward block is
    named by its mixer ("ssm"), one without a mixer by its feed-forward ("dense")."""
    label = {"local": "local", "global": "global"}.get(mixer, mixer)
    if ffn == "none":
        return label if mixer != "none" else "empty"
    if mixer == "none":
        return ffn
    mixed = "local" in cfg.attention_pattern or len(set(cfg.attention_pattern) - {"none"}) > 1
    return ffn + (f"-{label}" if mixed else "")


@lru_cache(maxsize=64)
def layer_groups(cfg: TransformerConfig) -> tuple[LayerGroup, ...]:
    """Runs of identical layers, in order of first appearance (names: ``_group_name``).

    Counted in closed form, never layer by layer: layers [0, first_dense_layers) are dense, the
    rest follow the feed-forward pattern, and layer i has attention_pattern[i % P] and
    ffn_pattern[i % Q]. With period R = lcm(P, Q) (or every layer when R exceeds them), in a run
    of layers [a, b) each of its first R layers i stands for the layers i, i + R, ... below b."""
    period = math.lcm(len(cfg.attention_pattern), len(cfg.ffn_pattern) or 1)
    period = min(period, cfg.n_layers)
    split = min(cfg.moe.first_dense_layers, cfg.n_layers) if cfg.moe is not None else 0
    found: dict[tuple[str, str, int], list[int]] = {}  # (ffn, mixer, window) -> [count, first layer]
    for a, b in ((0, split), (split, cfg.n_layers)):
        for first in range(a, min(a + period, b)):  # the first layer of each pattern entry in [a, b)
            count = (b - 1 - first) // period + 1
            key = (cfg.layer_ffn(first), cfg.layer_attention(first), cfg.layer_window(first))
            seen = found.setdefault(key, [0, first])
            seen[0] += count
            seen[1] = min(seen[1], first)
    groups = []
    for (ffn, mixer, window), (count, first) in sorted(found.items(), key=lambda kv: kv[1][1]):
        name = _group_name(cfg, mixer, ffn)
        groups.append(LayerGroup(name, count, ffn == "moe", window, first, mixer, ffn != "none"))
    return tuple(groups)
