"""Many-host profiles (analysis/hosts.py, analysis/hostviews.py) on a profile made here: three JAX processes
on the CPU joined by jax.distributed on localhost, profiled together, process 2 slowed by a sleep in every
step (tests/fixtures/many_hosts/make_profiles.py), so that it is the known straggler."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rooftop.analysis.exact import array_partials, partials, total
from rooftop.errors import InvalidConfigError
from rooftop.report.serialize import to_json
from tests.conftest import run_cli

SLOW = "host2"  # make_profiles.py slows process 2
SLEEP_S = 0.03  # by this much in every step (make_profiles.SLEEP_S)


def test_exact_sum_is_the_correctly_rounded_one() -> None:
    tenths = [0.1] * 10
    assert sum(tenths) == 0.9999999999999999  # summed in order, rounded ten times
    assert total(partials(tenths)) == 1.0
    assert total(array_partials(np.array(tenths))) == 1.0
    assert total(partials([1e16, 1.0, -1e16])) == 1.0  # 1e16 + 1.0 rounds the 1.0 away in order


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # a loaded machine draws slowly
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=60), st.integers(0, 60))
def test_partials_of_parts_merge_to_the_sum_of_the_whole(values: list[float], cut: int) -> None:
    left, right = values[:cut], values[cut:]
    merged = partials(left) + array_partials(np.array(right, float))
    assert total(merged) == math.fsum(values)


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The profile make_profiles.py made (tests/fixtures/many_hosts/README.md), unpacked into a run folder."""
    pytest.importorskip("jax")
    import gzip

    from tests.fixtures.many_hosts.make_profiles import SLEEP_S

    assert SLEEP_S == globals()["SLEEP_S"]
    out = tmp_path_factory.mktemp("hosts")
    run = out / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    for packed in sorted((Path(__file__).parents[1] / "fixtures" / "many_hosts" / "run").glob("*.xplane.pb.gz")):
        (run / packed.name.removesuffix(".gz")).write_bytes(gzip.decompress(packed.read_bytes()))
    return out


@pytest.fixture(scope="module")
def one_process(profile: Path) -> dict:
    from rooftop.analysis.profile import profile_report
    from rooftop.hardware.catalog import get_chip
    from rooftop.report.profile import profile_payload

    chip = get_chip("h100")
    return profile_payload(profile_report(profile, chip), chip)


def _merged(profile: Path, **how: object) -> tuple[dict, object]:
    from rooftop.analysis.hosts import many_host_report
    from rooftop.hardware.catalog import get_chip
    from rooftop.report.profile import profile_payload

    chip = get_chip("h100")
    merge = many_host_report([profile], chip, source=str(profile), **how)  # type: ignore[arg-type]
    return profile_payload(merge.report, chip), merge


@pytest.mark.jax
@pytest.mark.slow
def test_merged_report_equals_the_one_process_report(profile: Path, one_process: dict) -> None:
    assert len(one_process["ops"]) >= 3 and len(one_process["steps"]) == 4
    for workers in (1, 2):
        payload, merge = _merged(profile, workers=workers)
        assert payload == one_process  # every figure to the last bit, every note, in order
        assert merge.hosts == ("host0", "host1", "host2")  # type: ignore[attr-defined]


@pytest.mark.jax
@pytest.mark.slow
def test_merged_report_on_a_dask_local_cluster_equals_the_one_process_report(profile: Path, one_process: dict) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        payload, merge = _merged(profile, cluster=cluster.scheduler_address)
    assert payload == one_process
    assert merge.engine == "dask"  # type: ignore[attr-defined]


@pytest.mark.jax
@pytest.mark.slow
def test_the_slowed_process_is_the_straggler_of_every_step(profile: Path) -> None:
    _, merge = _merged(profile, workers=1)
    views = merge.views  # type: ignore[attr-defined]
    assert [s.index for s in views.steps] == [0, 1, 2, 3]
    assert all(s.straggler == SLOW for s in views.steps)
    assert views.stragglers[0].host == SLOW and views.stragglers[0].straggler_steps == 4
    for s in views.steps:  # later than every other host by more than half its sleep
        others = max(v for h, v in s.late_s.items() if h != SLOW)
        assert s.late_s[SLOW] - others > SLEEP_S / 2
    # the collective waited on longest waits for it, about its sleep each time (within the error of aligning
    # three processes' clocks by their profile start times: a millisecond or two each way)
    longest = max(views.collectives, key=lambda c: c.wait_s)
    assert longest.last_host == SLOW and 0.9 * SLEEP_S <= longest.mean_skew_s < SLEEP_S + 0.02
    assert longest.participants == 6 and longest.meetings == 4  # 3 processes x 2 devices, 4 steps
    for c in views.collectives:  # the summed wait covers at least the skew (the first arrival waits all of it)
        assert c.wait_s >= c.mean_skew_s * c.meetings - 1e-12
    for o in views.spread:
        assert o.min_s <= o.median_s <= o.max_s and o.hosts == 3


@pytest.mark.jax
@pytest.mark.slow
def test_cli_reads_a_glob_and_a_list_of_hosts_and_writes_the_hosts_views(profile: Path, one_process: dict) -> None:
    run = next((profile / "plugins" / "profile").iterdir())
    code, out, err = run_cli("profile", str(run / "host*.xplane.pb"), "--chip", "h100", "--workers", "1", "--json")
    assert code == 0, err
    d = json.loads(out)
    expected = json.loads(to_json(one_process))
    assert {k: v for k, v in d.items() if k not in ("hosts", "source")} == {
        k: v for k, v in expected.items() if k != "source"
    }
    assert d["hosts"]["names"] == ["host0", "host1", "host2"] and d["hosts"]["engine"] == "processes"
    assert {"steps", "collectives", "op_spread", "stragglers", "notes", "workers"} <= set(d["hosts"])
    assert d["hosts"]["stragglers"][0]["host"] == SLOW
    assert all(s["straggler"] == SLOW for s in d["hosts"]["steps"])
    files = [str(run / f"host{i}.xplane.pb") for i in range(3)]
    page = profile.parent / "hosts.html"
    code, out, err = run_cli("profile", *files, "--chip", "h100", "--workers", "1", "--html", str(page))
    assert code == 0, err
    assert "stragglers" in out and "host2" in out
    text = page.read_text()
    assert "stragglers (summed lateness at collectives)" in text and "the wait for the last participant" in text
    code, _, err = run_cli("profile", *files, "--chip", "h100", "--timeline", str(profile.parent / "t.json"))
    assert code == 2 and "--timeline draws one trace" in err and not (profile.parent / "t.json").exists()


def test_bad_host_lists_are_one_line_errors(tmp_path: Path) -> None:
    from rooftop.analysis.hosts import host_files

    with pytest.raises(InvalidConfigError, match="matches no file"):
        host_files([str(tmp_path / "none*.xplane.pb")])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "host0.xplane.pb").write_bytes(b"x")
    with pytest.raises(InvalidConfigError, match="two hosts named 'host0'"):
        host_files([tmp_path / "a", tmp_path / "b"])
    trace = tmp_path / "t.trace.json.gz"
    shutil.copy(tmp_path / "a" / "host0.xplane.pb", trace)
    with pytest.raises(InvalidConfigError, match=r"\.xplane\.pb"):
        host_files([tmp_path / "a" / "host0.xplane.pb", trace])
    code, _, err = run_cli("profile", str(tmp_path / "a" / "host0.xplane.pb"), str(tmp_path / "b" / "host0.xplane.pb"),
                           "--chip", "h100")  # fmt: skip
    assert code == 2 and "two hosts named" in err and "Traceback" not in err


def _part(host: str, clock_ns: int, starts: list[float], steps: list[tuple[int, float, float]]) -> object:
    """A host of one device running one all-reduce at ``starts`` (one per step) and an op of 1 s per step."""
    from rooftop.analysis.compare import OpPricing, Priced
    from rooftop.analysis.hostpart import CollectiveRuns, HostPart, OpPart
    from rooftop.analysis.trace.steps import Step

    device = f"{host}/device:TPU:0"
    runs = CollectiveRuns(np.array(starts), np.arange(len(starts)))
    ar, dot = ("jit_step", "all-reduce", "all-reduce"), ("jit_step", "dot", "dot")
    op = OpPart(len(starts), 1, partials([1.0] * len(starts)), None, None, (0.0, (device,), "dot"))
    pricing = OpPricing("dot", "jit_step", "dot", "other", Priced(None))
    return HostPart(host, 0, "-", {dot: op}, {dot: pricing}, [], [], (), [], [], clock_ns,
                    [Step(i, lo, hi) for i, lo, hi in steps], {ar: {device: runs}}, b"")  # fmt: skip


def test_host_views_by_hand() -> None:
    from rooftop.analysis.hostviews import host_views

    # host b's profile started 0.25 s after a's: its times are 0.25 s later on a's clock
    a = _part("a", 1_000_000_000, [1.0, 2.0], [(0, 0.5, 1.5), (1, 1.5, 2.5)])
    b = _part("b", 1_250_000_000, [1.0, 1.5], [(0, 0.5, 1.75), (1, 1.75, 2.0)])
    views = host_views([a, b])  # type: ignore[list-item]
    # step 0: a at 1.0, b at 1.0 + 0.25: b is 0.25 late; step 1: a at 2.0, b at 1.75: a is 0.25 late
    (c,) = views.collectives
    assert (c.meetings, c.participants) == (2, 2)
    assert c.max_skew_s == 0.25 and c.mean_skew_s == (0.25 + 0.25) / 2
    assert c.wait_s == 0.25 + 0.25  # the first to arrive waits the skew, the last nothing
    s0, s1 = views.steps
    assert s0.straggler == "b" and s0.late_s == {"a": 0.0, "b": 0.25}
    assert s1.straggler == "a" and s1.late_s == {"a": 0.25, "b": 0.0}
    assert s0.slowest == "b" and s0.time_s == {"a": 1.0, "b": 1.25}
    assert s1.slowest == "a" and s1.time_s == {"a": 1.0, "b": 0.25}
    # both 0.25 late in all, a straggler once each: ranked by name then
    assert [(x.host, x.late_s, x.straggler_steps, x.step_time_s) for x in views.stragglers] == [
        ("a", 0.25, 1, 2.0),
        ("b", 0.25, 1, 1.5),
    ]
    (spread,) = views.spread  # 2 runs of 1 s on each host: no spread
    assert (spread.min_s, spread.median_s, spread.max_s, spread.hosts) == (2.0, 2.0, 2.0, 2)
    assert views.notes == ()


def test_cluster_without_the_dask_extra_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rooftop.analysis.cluster import DASK_EXTRA
    from rooftop.analysis.hosts import many_host_report
    from rooftop.hardware.catalog import get_chip

    for i in range(2):
        (tmp_path / f"host{i}.xplane.pb").write_bytes(b"x")
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)  # import distributed -> ImportError
    from rooftop.reasons import said

    with pytest.raises(InvalidConfigError, match=re.escape(said(DASK_EXTRA))):
        many_host_report([tmp_path], get_chip("h100"), cluster="tcp://127.0.0.1:1")


def _bare_part(host: str, collectives: dict[tuple, dict[str, object]]) -> object:
    from rooftop.analysis.hostpart import HostPart

    return HostPart(host, 0, "-", {}, {}, [], [], (), [], [], 0, [], collectives, b"")  # type: ignore[arg-type]


def test_host_views_do_not_follow_the_order_devices_and_collectives_were_met() -> None:
    """Lateness and waits summed over devices and collectives: the same to the last bit whatever order the
    host parts' dicts hold them in (upstream, that order may follow string hashing: PYTHONHASHSEED). The
    starts are chosen so that summing in another order rounds otherwise (1e16 + 1 - 1e16)."""
    from rooftop.analysis.hostpart import CollectiveRuns
    from rooftop.analysis.hostviews import host_views

    def runs(start: float) -> CollectiveRuns:
        return CollectiveRuns(np.array([start]), np.array([0], np.int64))

    starts = {"h0": {"/device:CPU:0": 0.0, "/device:CPU:1": 1.0, "/device:CPU:2": 0.3},
              "h1": {"/device:CPU:3": 1e7, "/device:CPU:4": 0.7, "/device:CPU:5": 0.1}}  # fmt: skip
    keys = [("m", "all-reduce", f"all-reduce.{k}") for k in range(3)]

    def parts(reverse: bool) -> list[object]:
        out = []
        for host, devs in starts.items():
            order = list(reversed(devs)) if reverse else list(devs)
            ks = list(reversed(keys)) if reverse else keys
            out.append(_bare_part(host, {k: {d: runs(devs[d] * (1 + keys.index(k))) for d in order} for k in ks}))
        return out

    assert repr(host_views(parts(False))) == repr(host_views(parts(True)))  # type: ignore[arg-type]


@pytest.mark.jax
def test_many_hosts_output_is_the_same_under_any_string_hash_seed(profile: Path) -> None:
    from tests.conftest import run_with_hash_seed

    outputs = {run_with_hash_seed(seed, "profile", str(profile), "--chip", "h100", "--json") for seed in "01"}
    assert len(outputs) == 1


def test_a_link_to_a_host_inside_a_run_is_that_host_once(tmp_path: Path) -> None:
    """A symbolic link beside a host's .xplane.pb (or the same file named twice) counted that host twice."""
    from rooftop.analysis.hosts import host_files
    from rooftop.analysis.trace.load import profile_files

    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    for name in ("host0.xplane.pb", "host1.xplane.pb"):
        (run / name).write_bytes(b"x")
    (run / "alias.xplane.pb").symlink_to(run / "host1.xplane.pb")
    assert [p.name for p in profile_files(tmp_path)[0]] == ["host0.xplane.pb", "host1.xplane.pb"]
    assert [p.name for p in host_files([tmp_path])] == ["host0.xplane.pb", "host1.xplane.pb"]
    given = [run / "host0.xplane.pb", run / "alias.xplane.pb", run / "host0.xplane.pb", run / "host1.xplane.pb"]
    assert [p.name for p in host_files(given)] == ["host0.xplane.pb", "alias.xplane.pb"]
