"""The collectives rooftop predicts for a sharded matmul against those XLA emits.

Each case jits ``a @ b`` on 8 CPU devices arranged as a 4x2 mesh (X=4, Y=2) with
in_shardings and out_shardings set, and counts all-gather / all-reduce / reduce-scatter /
all-to-all / collective-permute ops in ``compiled.as_text()``.

Known equivalences, handled explicitly:
- XLA's CPU pipeline does not form reduce-scatter ops (the pass that rewrites all-reduce +
  dynamic-slice into reduce-scatter runs for GPU/TPU only): rooftop's reduce-scatter matches an
  all-reduce followed by a dynamic-slice in the CPU HLO.
- Where rooftop finds several strategies, XLA's SPMD partitioner may choose a different one
  than rooftop's fastest (on CPU it resolves a one-sided sharded contracting dim by gathering,
  without pricing the slice-and-reduce alternative; it resolves an output resharding by
  gathering the input rather than an all-to-all). The check is then that XLA's collectives
  are exactly those of one of rooftop's strategies; where rooftop has a single strategy, or
  the case is marked ``best``, they must be those of rooftop's fastest.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

jax = pytest.importorskip("jax")

from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from rooftop.hardware.catalog import get_chip  # noqa: E402
from rooftop.hardware.topology import make_mesh, parse_topology  # noqa: E402
from rooftop.sharding.matmul import analyze_sharded_matmul  # noqa: E402
from rooftop.sharding.notation import parse_matmul  # noqa: E402

_OP = re.compile(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(")
_DYNAMIC_SLICE = re.compile(r"\bdynamic-slice\(")
ROOFTOP_MESH = make_mesh(parse_topology(get_chip("tpu-v5e"), "4x2"), "X=4,Y=2")


@pytest.fixture(scope="module")
def mesh():
    if len(jax.devices()) < 8:
        pytest.skip("needs 8 host devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    return jax.make_mesh((4, 2), ("X", "Y"))


def spec(sub: str) -> tuple[str | tuple[str, ...] | None, ...]:
    """ "X," -> ("X", None); "XY,": (("X", "Y"), None)."""
    out: list[str | tuple[str, ...] | None] = []
    for part in sub.split(","):
        out.append(None if not part else part if len(part) == 1 else tuple(part))
    return tuple(out)


def notation(name: str, dims: str, sub: str) -> str:
    return f"{name}[" + ", ".join(d + (f"_{s}" if s else "") for d, s in zip(dims, sub.split(","), strict=True)) + "]"


def xla_collectives(mesh, lhs: str, rhs: str, out: str, shape: tuple[int, int, int]) -> tuple[Counter, int]:
    import jax.numpy as jnp

    i, j, k = shape

    def ns(sub: str) -> NamedSharding:
        return NamedSharding(mesh, P(*spec(sub)))

    f = jax.jit(lambda a, b: a @ b, in_shardings=(ns(lhs), ns(rhs)), out_shardings=ns(out))
    text = f.lower(jax.ShapeDtypeStruct((i, j), jnp.float32), jax.ShapeDtypeStruct((j, k), jnp.float32)).compile()
    hlo = text.as_text()
    return Counter(_OP.findall(hlo)), len(_DYNAMIC_SLICE.findall(hlo))


def normalise(observed: Counter, slices: int, predicted: Counter) -> Counter:
    """Read XLA CPU's all-reduce + dynamic-slice as the reduce-scatter rooftop predicts."""
    out = Counter(observed)
    missing = predicted["reduce-scatter"] - out["reduce-scatter"]
    if missing > 0 and out["all-reduce"] >= missing and slices:
        out["all-reduce"] -= missing
        out["reduce-scatter"] += missing
    return +out


CASES = [
    # lhs, rhs, out, (I, J, K), rooftop's fastest must match XLA
    ("X,", ",Y", "X,Y", (64, 128, 256), True),  # case 1: no communication
    (",X", "X,", ",", (64, 128, 256), True),  # case 3: all-reduce
    (",X", "X,", ",X", (64, 128, 256), True),  # case 3: reduce-scatter onto K
    (",X", "X,", "X,", (64, 128, 256), True),  # case 3: reduce-scatter onto I
    (",X", "X,", ",XY", (64, 128, 256), True),  # reduce-scatter, then a free slice over Y
    ("X,Y", "Y,", "X,", (64, 128, 256), True),  # all-reduce over Y
    (",XY", "XY,", ",", (64, 128, 256), True),  # all-reduce over X and Y
    (",X", "X,Y", ",Y", (64, 128, 256), True),  # all-reduce over X, K stays on Y
    ("X,", "X,", "X,", (64, 128, 256), True),  # weights sharded on J (FSDP-like): gather B
    ("X,", ",X", "X,", (4096, 128, 16), True),  # case 4, output asks for I_X: gather B
    ("X,", ",X", ",X", (16, 128, 4096), True),  # case 4, output asks for K_X: gather A
    (",", "X,", ",", (16, 1024, 16), True),  # case 2, small: latency-bound, gathering B is fastest
    (",", "X,", ",", (16, 65536, 16), False),  # case 2, long J: XLA gathers B; rooftop: slice A + all-reduce
    ("X,", ",", ",X", (64, 128, 256), True),  # output resharding, small: gather A first
    ("X,", ",", ",X", (4096, 4096, 64), False),  # large A: XLA gathers A; rooftop: all-to-all of C
]


@pytest.mark.jax
@pytest.mark.parametrize(("lhs", "rhs", "out", "shape", "best"), CASES)
def test_xla_emits_the_collectives_rooftop_predicts(mesh, lhs, rhs, out, shape, best) -> None:
    expr = parse_matmul(f"{notation('A', 'IJ', lhs)} @ {notation('B', 'JK', rhs)} -> {notation('C', 'IK', out)}")
    r = analyze_sharded_matmul(expr, dict(zip("IJK", shape, strict=True)), ROOFTOP_MESH)
    strategies = [r.best, *r.alternatives]
    predicted = [Counter(s.kind for s in t.strategy.steps if s.kind != "matmul") for t in strategies]
    observed, slices = xla_collectives(mesh, lhs, rhs, out, shape)
    readings = [normalise(observed, slices, p) for p in predicted]
    matches = [i for i, (p, o) in enumerate(zip(predicted, readings, strict=True)) if p == o]
    assert matches, f"{expr}: XLA emitted {dict(observed)}; rooftop's strategies: {[dict(p) for p in predicted]}"
    if best or len(strategies) == 1:
        assert 0 in matches, f"{expr}: XLA emitted {dict(observed)}, rooftop's fastest is {r.best.strategy.name}"
