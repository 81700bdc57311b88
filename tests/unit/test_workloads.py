"""The worked workload: naive sharding emits more collectives than the fixed one, same maths."""

import re

import pytest

jax = pytest.importorskip("jax")

from rooftop.workloads import mock_transformer  # noqa: E402
from tests.conftest import worked_example  # noqa: E402


def _collectives(text: str) -> dict[str, int]:
    kinds = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
    return {k: len(re.findall(rf"= \S+ {k}(?:-start)?\(", text)) for k in kinds}


@pytest.mark.skipif(len(jax.devices()) < 8, reason="needs 8 devices")
def test_naive_sharding_wastes_collectives() -> None:
    naive_step, naive_args = worked_example("naive")
    fixed_step, fixed_args = worked_example("fixed")
    naive = _collectives(naive_step.lower(*naive_args).compile().as_text())
    fixed = _collectives(fixed_step.lower(*fixed_args).compile().as_text())
    assert fixed["all-gather"] == 0 and naive["all-gather"] > 0
    assert sum(naive.values()) > sum(fixed.values())
    assert float(naive_step(*naive_args)[0]) == pytest.approx(float(fixed_step(*fixed_args)[0]), rel=1e-5)


def test_unknown_sharding() -> None:
    from rooftop.errors import InvalidConfigError

    with pytest.raises(InvalidConfigError, match="unknown sharding 'clever'"):
        mock_transformer("clever")
