"""Bound, term kind and verdict are str-valued enums: mypy checks each spelling, and the JSON and every
comparison with the plain string stay what they were."""

from __future__ import annotations

import json
import re

import orjson

import rooftop.analysis.compare as compare
from rooftop.analysis.compare import Verdict
from rooftop.cost.cost import Comm
from rooftop.cost.op import explicit
from rooftop.cost.roofline import TERM_KINDS, Bound, TermKind, collective_term, roofline
from rooftop.hardware.catalog import get_chip
from rooftop.hardware.topology import make_mesh, parse_topology
from rooftop.report.serialize import estimate_dict

H100 = get_chip("h100")


def test_a_bound_is_its_string_in_comparisons_and_json() -> None:
    """1 GB over 3.35 TB/s against 1 GFLOP at 990 TFLOP/s: memory-bound."""
    est = roofline(explicit(1e9, 1e9), H100)
    bound: str = est.bound  # what a caller holding a plain str sees
    assert est.bound is Bound.MEMORY and bound == "memory" and f"{est.bound}-bound" == "memory-bound"
    assert {"memory": 1}[est.bound] == 1  # hashes as the string: a dict keyed by the plain names finds it
    payload = estimate_dict(est)
    assert json.dumps(payload) == json.dumps(json.loads(json.dumps(payload)))  # plain strings once written
    assert '"bound": "memory"' in json.dumps(payload) and b'"bound":"memory"' in orjson.dumps(payload)
    assert [t["kind"] for t in payload["terms"]] == ["compute", "memory"]


def test_every_term_has_a_kind_from_the_enum() -> None:
    est = roofline(explicit(1e12, 1e6, unit="vector"), H100)
    mesh = make_mesh(parse_topology(H100, "1x8"), {"tp": 8})
    network = collective_term(Comm("all-reduce", ("tp",), 1 << 30), mesh, H100)
    latency = collective_term(Comm("all-reduce", ("tp",), 8), mesh, H100)
    kinds = [t.kind for t in (*est.terms, network, latency)]
    assert kinds == [TermKind.COMPUTE, TermKind.MEMORY, TermKind.NETWORK, TermKind.LATENCY]
    assert all(isinstance(k, TermKind) for k in kinds) and set(TERM_KINDS) == set(TermKind)


def test_the_verdicts_are_the_ones_the_module_documents() -> None:
    """analysis/compare.py's docstring names each verdict in quotes; the enum holds exactly those."""
    doc = compare.__doc__ or ""
    named = set(re.findall(r'"([a-z -]+)"', doc.split("Per step:")[0]))
    assert named == {v.value for v in Verdict}
    assert Verdict("near roofline") is Verdict.NEAR_ROOFLINE
    assert json.dumps([Verdict.UNKNOWN_COST]) == '["unknown cost"]'
