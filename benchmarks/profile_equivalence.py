"""`rooftop profile` before and after a change to the trace loaders: the same output, byte for byte.

Runs ``rooftop profile`` with two source trees (``--before DIR`` and ``--after DIR``, each a checkout whose
``src`` is put first on ``PYTHONPATH``) on the same inputs, and diffs what each printed (stdout, stderr and
the exit status):

- the JSON traces of ``../shared/data/third_party_profiles/chrome_trace`` (when present), with ``--json``
  and as tables;
- the synthetic traces of ``benchmarks/bench_profile.py`` (``--events`` each, default 20,000): the JAX
  layout with its HLO, and without step markers; the Kineto one; the tiny-kernel one;
- ``--fuzz N`` mutated JSON traces of the fuzz suite (``tests.fuzz.targets.make_case("trace", seed)`` for
  seeds from ``--seed``; XPlane cases are left out): values of the wrong type, huge, NaN, B/E pairs out of
  order, broken structure; their one-line errors must be the same too.

Each tree runs every case in one process (``rooftop.cli.main.main(argv)``, output captured). Prints the
number of cases, how many differ, and the first differences; exits 1 when any differs.

Usage: ``python benchmarks/profile_equivalence.py --before DIR --after DIR [--events 20000] [--fuzz 400]
[--seed 0] [--work DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
THIRD_PARTY = ROOT.parent / "shared" / "data" / "third_party_profiles" / "chrome_trace"


def run_cases(cases_file: Path, out_file: Path) -> int:
    """Child: run each argv of ``cases_file`` in this process; write (stdout, stderr, exit status) of each."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    from rooftop.cli.main import main

    results = []
    for argv in json.loads(cases_file.read_text()):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: Any = main(argv)
            except SystemExit as exc:
                code = exc.code
            except Exception as exc:  # an exception escaping main is an outcome to compare too
                code = f"escaped: {type(exc).__name__}: {exc}"
        results.append([out.getvalue(), err.getvalue(), code])
    out_file.write_text(json.dumps(results))
    return 0


def synthetic_cases(work: Path, events: int) -> list[list[str]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_profile as bench

    cases = []
    for kind, markers in (("jax", True), ("jax", False), ("kineto", True), ("tiny", True)):
        path, hlo = bench.build(kind, work, events, markers, reuse=False)
        cases.append(["profile", str(path), "--chip", "h100", "--json"] + (["--hlo", str(hlo)] if hlo else []))
        if kind == "jax" and markers:
            cases.append(["profile", str(path), "--chip", "h100", "--json"])
    return cases


def fuzz_cases(work: Path, count: int, seed: int) -> list[list[str]]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.fuzz.oracle import materialize
    from tests.fuzz.targets import make_case

    cases = []
    for n in range(seed, seed + count):
        try:
            case = make_case("trace", n)
        except Exception:  # a bug of the case generator (benchmarks/fuzz.py counts these apart): no case
            continue
        if not any(name.endswith((".json", ".json.gz")) for name in case.files):
            continue  # an XPlane case: not read by the JSON loader
        where = work / f"fuzz-{n}"
        where.mkdir(parents=True, exist_ok=True)
        materialize(case, where)
        cases.append([a.replace("{W}", str(where)) for a in case.argv])
    return cases


def run_tree(tree: Path, cases_file: Path, out_file: Path) -> list[list[Any]]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    argv = [sys.executable, __file__, "--run", str(cases_file), str(out_file)]
    subprocess.run(argv, env=env, check=True, cwd=tempfile.gettempdir())
    return json.loads(out_file.read_text())  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="checkout before the change (its src/ is imported)")
    parser.add_argument("--after", type=Path, default=ROOT, help="checkout after the change (default: this one)")
    parser.add_argument("--events", type=int, default=20_000, help="events per synthetic trace (default 20000)")
    parser.add_argument("--fuzz", type=int, default=400, help="fuzz cases tried (default 400; JSON ones run)")
    parser.add_argument("--seed", type=int, default=0, help="first fuzz case number (default 0)")
    parser.add_argument("--work", type=Path, help="write the inputs and outputs here (default: a temporary folder)")
    parser.add_argument("--run", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        return run_cases(*args.run)
    if args.before is None:
        parser.error("--before DIR is required")
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        cases = []
        for path in sorted(THIRD_PARTY.glob("*.json.gz")) if THIRD_PARTY.is_dir() else []:
            cases += [["profile", str(path), "--chip", "h100", "--json"], ["profile", str(path), "--chip", "h100"]]
        cases += synthetic_cases(work, args.events)
        cases += fuzz_cases(work, args.fuzz, args.seed)
        cases_file = work / "cases.json"
        cases_file.write_text(json.dumps(cases))
        before = run_tree(args.before.resolve(), cases_file, work / "before.json")
        after = run_tree(args.after.resolve(), cases_file, work / "after.json")
        differ = [k for k in range(len(cases)) if before[k] != after[k]]
        errors = sum(1 for b in before if b[2] not in (0, None))
        print(f"{len(cases)} cases ({errors} end in an error before), {len(differ)} differ")
        for k in differ[:5]:
            print(f"\n== {' '.join(cases[k])}")
            for part, b, a in zip(("stdout", "stderr", "exit"), before[k], after[k], strict=True):
                if b != a:
                    lines = difflib.unified_diff(str(b).splitlines(), str(a).splitlines(), "before", "after",
                                                 lineterm="", n=1)  # fmt: skip
                    print(f"-- {part}\n" + "\n".join(list(lines)[:40]))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
