"""Command lines for every subcommand: a valid base, then one to three of its values replaced by hostile
ones (or near misses of valid ones), flags dropped, added or repeated, ``--json`` on or off.

Paths get their own hostile kinds: missing, a directory, empty, garbage, a FIFO or a link to /dev/zero
(both run as a process: they may block inside C code), a link loop, a NUL byte, markup in the name.
"""

from __future__ import annotations

import random
from pathlib import Path

from tests.fuzz import hostile
from tests.fuzz.oracle import Case, Special

ROOT = Path(__file__).resolve().parents[2]
THIRD_PARTY = ROOT.parent / "shared" / "data" / "third_party_profiles"
CHIP_DIR = ROOT / "src" / "rooftop" / "catalog" / "chips"
MODEL_DIR = ROOT / "src" / "rooftop" / "catalog" / "models"
HF_DIR = ROOT / "tests" / "fixtures" / "hf_configs"

#: valid values of each kind of flag (hostile ones come from tests.fuzz.hostile)
VALID: dict[str, tuple[str, ...]] = {
    "chip": ("h100", "tpu-v5e", "a100", "b200", "tpu-v5p", "H100 SXM", "tpu-7x", "tpu-v4", "h200", "tpu-v6e"),
    "model": ("llama-3-8b", "llama-3-70b", "mixtral-8x7b", "deepseek-v3", "gemma-2-27b", "mistral-7b", "llama-2-7b"),
    "topology": ("4x4", "2x4", "4x4x4", "2*16x16", "16x8", "8", "2x8", "1", "16x20x28", "2*4x4", "4x8"),
    "mesh": ("X=4,Y=4", "X=16", "X=2,Y=8", "X=4,Y=4,Z=4", "X=2,Y=2", "X=8", "a=1,aa=1,aaa=1,aaaa=16"),
    "logical_mesh": ("data=4,model=2", "data=8", "x=2,y=2,z=2", "data=2", "model=8"),
    "axes": ("X", "X,Y", "Y", "Z", "X,Y,Z"),
    "bytes": ("1MiB", "2GiB", "4096", "1.5e9", "64KiB"),
    "flops": ("1e12", "550T", "5.5e14", "4096"),
    "count": ("8", "64", "1", "2k", "4096", "16", "256"),
    "tokens": ("4M", "1M", "15T", "2M"),
    "seq": ("4096", "2048", "8Ki", "512"),
    "duration": ("50ms", "500ms", "1s", "20us"),
    "price": ("2.5", "0", "10"),
    "rate": ("2", "0.5", "100"),
    "efficiency": ("matrix=0.7,network=0.9", "hbm=0.9,step_s=0.002", "matrix=1", "usable_hbm_fraction=0.9"),
    "fix": (
        "tp=8",
        "tp=8,pp=4,remat=full,zero=1,offload=none",
        "tp=16,remat=full",
        "dp=2",
        "ep=8",
        "mb=4,v=2",
        "pp=4,v=3,pipeline_balance=1",
        "fsdp=8,fsdp_reshard=0",
        "sp=0,flash=0,dropout=1,pipeline_balance=0",
    ),
    "dims": ("B=4096,D=8192,F=8192", "I=1024,J=1024,K=1024", "B=8,D=16,F=32"),
    "shape": ("128,2048", "16,16", "8x8", "1024"),
    "dtype": ("bf16", "fp8", "int8", "f32", "fp32", "int4", "float8_e4m3fn", "s8", "fp16"),
    "expr": (
        "A[B,D] @ W[D,F]",
        "A[I_X,J] @ B[J,K_Y]",
        "A[B,D] @ W[D,F] -> C[B,F]",
        "A[I_XY,J] @ B[J,K] -> C[I_XY,K]",
        "A[I_" + "X" * 40 + "Z,J] @ B[J,K]",
    ),
    "tensor": ("A[I_XY, J]", "A[I_X,J]", "A[I,J_Y]", "A[I_X,J_Y]", "A[I_" + "a" * 40 + "b,J]", "A[I_aaaa,J]"),
    "array": ("bf16[1024,4096]", "f32[16,16]", "int8[64]"),
    "sharding": ("[B_X, D_Y]", "[D0, D1]", "[B_X, D]"),
    "top": ("5", "0", "1", "3"),
    "name": ("calibrated", "my chip", "h100-measured"),
    "kind": ("all-gather", "all-reduce", "reduce-scatter", "all-to-all"),
    "unit": ("matrix", "vector"),
    "objective": ("time", "cost", "memory"),
    "optimizer": ("adam", "adamw", "lion", "sgd-momentum", "sgd"),
    "scheduler": ("chunked", "prefill-first"),
    "kv_dtype": ("bf16", "fp8", "int8"),
    "weight_dtype": ("bf16", "fp8", "int4"),
    "chips_list": ("h100:16,tpu-v5e:4x4", "h100:8", "b200:8,h200:8,a100:16", "tpu-v5p:4x4x4,h100:64"),
    "remat": ("none", "selective", "dots", "full"),
    "algorithm": ("hierarchical", "in-network", "ring", "bidirectional-ring", "tree"),
}
#: kinds whose values are paths (made by :func:`path_value`)
PATH_KINDS = ("plot", "hlo_file", "trace", "config", "catalog", "out", "timeline", "html")

Item = tuple[str | None, str, str | None]  # (flag or None for a positional, kind, value or None for a switch)


def _bases() -> dict[str, list[list[Item]]]:
    chip, topo = ("--chip", "chip", "tpu-v5e"), ("--topology", "topology", "4x4")
    return {
        "chips": [[], [(None, "chip", "h100")], [(None, "chip", "tpu-v5e"), ("--catalog", "catalog", "")]],
        "roofline": [[("--chip", "chip", "h100"), ("--flops", "flops", "1e12"), ("--bytes", "bytes", "1GiB")]],
        "matmul": [
            [(None, "expr", "A[B,D] @ W[D,F]"), ("--dims", "dims", "B=4096,D=8192,F=8192"), ("--chip", "chip", "h100")],
            [(None, "expr", "A[I_X,J] @ B[J,K_Y]"), ("--dims", "dims", "I=1024,J=1024,K=1024"), chip, topo,
             ("--mesh", "mesh", "X=4,Y=4")],
        ],
        "collective": [
            [(None, "kind", "all-gather"), chip, topo, ("--axes", "axes", "X"), ("--bytes", "bytes", "1MiB")],
            [(None, "kind", "all-reduce"), ("--chip", "chip", "h100"), ("--topology", "topology", "2x8"),
             ("--axes", "axes", "X,Y"), ("--array", "array", "bf16[1024,4096]"),
             ("--sharding", "sharding", "[B_X, D_Y]")],
        ],
        "shard": [[(None, "tensor", "A[I_XY, J]"), ("--shape", "shape", "128,2048"),
                   ("--mesh", "mesh", "X=2,Y=8,Z=2")],
                  [(None, "tensor", "A[I_aaaa,J]"), ("--shape", "shape", "16,16"),
                   ("--mesh", "mesh", "a=1,aa=1,aaa=1,aaaa=16")]],
        "models": [[]],
        "model": [[(None, "model", "llama-3-8b")], [("--model", "config", "")], [(None, "config", "")]],
        "train": [
            [(None, "model", "llama-3-8b"), ("--chip", "chip", "h100"), ("--chips", "count", "64"),
             ("--batch-tokens", "tokens", "1M"), ("--seq-len", "seq", "4096")],
            [(None, "model", "llama-3-70b"), ("--chip", "chip", "tpu-v5p"), ("--topology", "topology", "4x4x4"),
             ("--batch-tokens", "tokens", "4M"), ("--seq-len", "seq", "4096")],
        ],
        "limits": [
            [(None, "model", "llama-3-70b"), ("--chip", "chip", "tpu-v5p"), ("--topology", "topology", "4x4x4"),
             ("--batch-tokens", "tokens", "4M"), ("--seq-len", "seq", "4096")],
            [(None, "model", "mixtral-8x7b"), ("--chip", "chip", "h100"), ("--chips", "count", "64")],
        ],
        "serve": [
            [(None, "model", "llama-3-8b"), ("--chip", "chip", "h100"), ("--chips", "count", "8"),
             ("--prompt-len", "seq", "2048"), ("--gen-len", "seq", "512")],
            [(None, "model", "llama-3-70b"), chip, topo, ("--prompt-len", "seq", "2048"), ("--gen-len", "seq", "512")],
        ],
        "compare": [
            [(None, "model", "llama-3-8b"), ("--chips-list", "chips_list", "h100:16,tpu-v5e:4x4"),
             ("--batch-tokens", "tokens", "1M"), ("--seq-len", "seq", "4096")],
            [(None, "model", "llama-3-8b"), ("--chips-list", "chips_list", "h100:8"), ("--prompt-len", "seq", "512"),
             ("--gen-len", "seq", "128")],
        ],
        "hlo": [[(None, "hlo_file", ""), ("--chip", "chip", "h100")]],
        "profile": [[(None, "trace", ""), ("--chip", "chip", "h100")]],
        "calibrate": [[("--quick", "", None), ("--repeats", "top", "1")]],
    }  # fmt: skip


#: flags a command may gain (with a valid or hostile value)
OPTIONAL: dict[str, list[tuple[str, str]]] = {
    "chips": [("--catalog", "catalog")],
    "roofline": [("--dtype", "dtype"), ("--unit", "unit"), ("--plot", "plot"), ("--catalog", "catalog")],
    "matmul": [("--dtype", "dtype"), ("--lhs-dtype", "dtype"), ("--rhs-dtype", "dtype"), ("--out-dtype", "dtype"),
               ("--compute-dtype", "dtype"), ("--topology", "topology"), ("--mesh", "mesh"), ("--plot", "plot")],
    "collective": [("--mesh", "mesh"), ("--sharp", ""), ("--sharding", "sharding"), ("--catalog", "catalog"),
                   ("--algorithm", "algorithm")],
    "shard": [("--dtype", "dtype")],
    "models": [("--catalog", "catalog")],
    "model": [("--seq-len", "seq"), ("--batch", "count"), ("--kv-dtype", "kv_dtype"), ("--remat", "remat")],
    "train": [("--tokens", "tokens"), ("--fix", "fix"), ("--objective", "objective"), ("--top", "top"),
              ("--optimizer", "optimizer"), ("--efficiency", "efficiency"), ("--price-per-chip-hour", "price"),
              ("--plot", "plot"), ("--compute-dtype", "dtype"), ("--max-nodes-per-token", "count"),
              ("--timeline", "timeline"), ("--html", "html"), ("--algorithm", "algorithm")],
    "limits": [("--batch-tokens", "tokens"), ("--seq-len", "seq"), ("--optimizer", "optimizer"),
               ("--weight-dtype", "weight_dtype"), ("--efficiency", "efficiency"), ("--catalog", "catalog"),
               ("--algorithm", "algorithm")],
    "serve": [("--batch", "count"), ("--max-step-latency", "duration"), ("--max-ttft", "duration"),
              ("--weight-dtype", "weight_dtype"), ("--kv-dtype", "kv_dtype"), ("--activation-dtype", "kv_dtype"),
              ("--requests-per-s", "rate"), ("--price-per-chip-hour", "price"), ("--efficiency", "efficiency"),
              ("--algorithm", "algorithm"),
              ("--ideal", ""), ("--plot", "plot"), ("--concurrency", "count"), ("--scheduler", "scheduler"),
              ("--token-budget", "count"), ("--timeline", "timeline")],
    "compare": [("--tokens", "tokens"), ("--fix", "fix"), ("--max-step-latency", "duration"),
                ("--weight-dtype", "weight_dtype"), ("--catalog", "catalog")],
    "hlo": [("--mesh", "logical_mesh"), ("--topology", "topology"), ("--top", "top"), ("--plot", "plot"),
            ("--timeline", "timeline")],
    "profile": [("--hlo", "hlo_file"), ("--mesh", "logical_mesh"), ("--topology", "topology"), ("--top", "top"),
                ("--plot", "plot"), ("--timeline", "timeline"), ("--html", "html"), ("--workers", "count")],
    "calibrate": [("--out", "out"), ("--name", "name")],
}  # fmt: skip

#: how often each command is drawn (calibrate measures the device: seconds per run)
WEIGHTS = {"chips": 3, "roofline": 6, "matmul": 10, "collective": 10, "shard": 8, "models": 1, "model": 8,
           "train": 14, "limits": 6, "serve": 14, "compare": 4, "hlo": 8, "profile": 8, "calibrate": 0}  # fmt: skip


def _real(sub: str, pattern: str) -> list[str]:
    folder = THIRD_PARTY / sub
    return [str(p) for p in sorted(folder.glob(pattern))] if folder.is_dir() else []


SMALL_HLO = b"""HloModule m, num_partitions=8

ENTRY e {
  p0 = f32[64,64]{1,0} parameter(0)
  p1 = f32[64,64]{1,0} parameter(1)
  d = f32[64,64]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT ar = f32[64,64]{1,0} all-reduce(d), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=e
}
"""


class PathMaker:
    """Values for path flags; adds the files they need to the case."""

    def __init__(self, rng: random.Random, case: Case) -> None:
        self.rng, self.case = rng, case
        self.requested: list[tuple[str, str]] = []  # (value given, output the oracle expects of it)

    def __call__(self, kind: str) -> str:
        rng = self.rng
        if kind == "plot":
            return self.output(rng.choice(["png", "svg", "pdf", "jpg", "", "txt", "PNG", "png.png"]))
        if kind == "out":
            return self.output(rng.choice(["toml", "", "txt"]))
        if kind == "timeline":
            return self.output(rng.choice(["json", "", "txt", "json.gz"]))
        if kind == "html":
            return self.output(rng.choice(["html", "", "htm", "txt"]))
        if rng.random() < 0.45:
            return self.hostile(kind)
        if kind == "hlo_file":
            real = _real("hlo", "*")
            return rng.choice(real) if real and rng.random() < 0.7 else self.file("m.hlo", SMALL_HLO)
        if kind == "trace":
            real = _real("chrome_trace", "*.json.gz") + _real("xplane", "*.xplane.pb")
            small = [p for p in real if Path(p).stat().st_size < 400_000]
            return rng.choice(small) if small else self.hostile(kind)
        if kind == "config":
            return str(rng.choice(sorted(HF_DIR.glob("*.json")) + sorted(MODEL_DIR.glob("*.toml"))[:3]))
        if kind == "catalog":
            return str(rng.choice([CHIP_DIR, *sorted(CHIP_DIR.glob("*.toml"))[:3]]))
        return self.hostile(kind)

    def file(self, name: str, data: bytes | Special) -> str:
        self.case.files[name] = data
        return "{W}/" + name

    def output(self, ext: str) -> str:
        """A value for an output flag; the outputs it asks for are noted with it (``requested``)."""
        before = len(self.case.outputs)
        value = self._output(ext)
        self.requested += [(value, name) for name in self.case.outputs[before:]]
        return value

    def _output(self, ext: str) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.5:
            name = f"out.{ext}" if ext else "out"
            self.case.outputs += ("{W}/" + name,)
            return "{W}/" + name
        if roll < 0.6:  # nothing can be written there: exit 0 would be wrong
            self.case.outputs += ("",)
            return rng.choice(["", "{W}", "{W}/", "{W}/no/such/dir/out.png", ".", "{W}/."])
        if roll < 0.65:  # a name that is all extension
            name = "." + (ext or "png")
            self.case.outputs += ("{W}/" + name,)
            return "{W}/" + name
        if roll < 0.7:
            name = f"{hostile.text(rng)[:100]}.{ext}".replace("/", "_").replace("\x00", "")
            self.case.outputs += ("{W}/" + name,)
            return "{W}/" + name
        if roll < 0.8:  # the target is already there: a file, a directory, a link to elsewhere
            name = f"out.{ext or 'png'}"
            there: list[bytes | Special] = [b"old", Special("dir"), Special("symlink", "{W}/elsewhere")]
            self.case.files[name] = rng.choice(there)
            if self.case.files[name] != Special("dir"):
                self.case.outputs += ("{W}/" + name,)
            return "{W}/" + name
        if roll < 0.9:  # a planted link where a temporary file might go ({PID}: this process)
            name = f"out.{ext or 'png'}"
            self.case.files[f"{name}.tmp-{{PID}}"] = Special("symlink", "{W}/planted")
            self.case.outputs += ("{W}/" + name,)
            return "{W}/" + name
        name = hostile.text(rng).replace("/", "_").replace("\x00", "")[:200] or "x"
        self.case.outputs += ("{W}/" + name,)
        return "{W}/" + name

    def hostile(self, kind: str) -> str:
        """A path that is not what the flag expects."""
        rng = self.rng
        ext = {"hlo_file": "hlo", "trace": rng.choice(["xplane.pb", "json", "json.gz", "pb", "trace.json.gz"]),
               "config": rng.choice(["json", "toml"]), "catalog": "toml"}.get(kind, "txt")  # fmt: skip
        roll = rng.randrange(16)
        if roll == 0:
            return f"{{W}}/missing.{ext}"
        if roll == 1:
            return "{W}"
        if roll == 2:
            return self.file(f"empty.{ext}", b"")
        if roll == 3:
            return self.file(f"garbage.{ext}", bytes(rng.randrange(256) for _ in range(rng.randint(1, 3000))))
        if roll == 4:
            self.case.process = True
            return self.file(f"fifo.{ext}", Special("fifo"))
        if roll == 5:
            self.case.process = True
            return self.file(f"zero.{ext}", Special("symlink", "/dev/zero"))
        if roll == 6:
            return self.file(f"loop.{ext}", Special("symlink", f"{{W}}/loop.{ext}"))
        if roll == 7:
            return self.file(f"dir.{ext}", Special("dir"))
        if roll == 8:
            return "{W}/" + "x" * 300 + f".{ext}"
        if roll == 9:
            return rng.choice(["", " ", "/dev/null", "-", "~", "/", "{W}/a\x00b." + ext])
        if roll == 10:
            name = hostile.text(rng).replace("/", "_").replace("\x00", "")[:100] + f".{ext}"
            return self.file(name, b"[/bold] " + hostile.text(rng).encode("utf-8", "replace"))
        if roll == 11 and kind == "trace":  # a profile directory with links out of it, FIFOs, several runs
            return self.profile_dir()
        if roll == 12:
            text = hostile.anything(rng)
            return self.file(f"text.{ext}", text.encode("utf-8", "surrogateescape"))
        if roll == 13 and kind in ("config", "trace"):
            return self.file(f"json.{ext}", rng.choice([b"[]", b"{}", b"null", b"1", b'"x"', b"[" * 100000, b'{"a":']))
        if roll == 14:
            return self.file(f"bin.{ext}", b"\x1f\x8b" + bytes(rng.randrange(256) for _ in range(100)))
        return hostile.anything(rng)

    def profile_dir(self) -> str:
        rng = self.rng
        real = _real("xplane", "*.xplane.pb")
        run = "prof/plugins/profile/" + rng.choice(["2024_01_01", "run", "[/bold]", "²"])
        roll = rng.randrange(7)
        if roll == 0 and real:  # a profile directory is read for the regular files inside it only
            self.case.files[f"{run}/host.xplane.pb"] = Special("symlink", rng.choice(real))
            self.case.refuse = "the profile directory's only trace is a link to a file outside it"
        elif roll == 1:
            self.case.process = True
            self.case.files[f"{run}/host.xplane.pb"] = Special("fifo")
        elif roll == 2:
            self.case.process = True
            self.case.files[f"{run}/host.xplane.pb"] = Special("symlink", "/dev/zero")
        elif roll == 3:
            self.case.files[f"{run}/host.xplane.pb"] = Special("dir")
        elif roll == 4:
            self.case.files["prof/a.json"] = b"[]"
            self.case.files["prof/b.json"] = b"[]"
        elif roll == 5:
            self.case.files[f"{run}/x.txt"] = b"x"
        else:
            self.case.files["prof/t.json"] = Special("symlink", "/etc/hostname")
            self.case.refuse = "the profile directory's only trace is a link to a file outside it"
        return "{W}/prof"


def value_for(rng: random.Random, kind: str, paths: PathMaker) -> str:
    if kind in PATH_KINDS:
        return paths(kind)
    valid = VALID.get(kind, ("1",))
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(valid)
    if roll < 0.6:
        return hostile.spoil(rng, rng.choice(valid))
    return hostile.anything(rng)


def cli_case(rng: random.Random, command: str | None = None) -> Case:
    """A hostile command line for ``command`` (drawn by :data:`WEIGHTS` when None)."""
    if command is None:
        # zero-weight commands left out: hypothesis' random() can return 1.0, which random.choices maps to
        # the last name whatever its weight (calibrate, whose in-process collectives abort on a loaded machine)
        names = [n for n, w in WEIGHTS.items() if w > 0]
        command = rng.choices(names, [WEIGHTS[n] for n in names])[0]
    case = Case("cli", [], label=command)
    paths = PathMaker(rng, case)
    items: list[Item] = [
        (f, k, paths(k) if k in PATH_KINDS and v == "" else v) for f, k, v in rng.choice(_bases()[command])
    ]
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        roll = rng.random()
        if roll < 0.6 and any(v is not None for _, _, v in items):
            i = rng.choice([i for i, (_, _, v) in enumerate(items) if v is not None])
            flag, kind, _ = items[i]
            items[i] = (flag, kind, value_for(rng, kind, paths))
        elif roll < 0.85 and OPTIONAL[command]:
            flag, kind = rng.choice(OPTIONAL[command])
            items.append((flag, kind, value_for(rng, kind, paths) if kind else None))
        elif roll < 0.92 and items:
            items.pop(rng.randrange(len(items)))
        elif items:
            items.append(rng.choice(items))
    argv = [command]
    for flag, _, value in items:
        if flag is not None and value is not None and rng.random() < 0.3:
            argv.append(f"{flag}={value}")  # lets a value that starts with '-' through
            continue
        if flag is not None:
            argv.append(flag)
        if value is not None:
            argv.append(value)
    if rng.random() < 0.5:
        argv.append("--json")
    if command == "calibrate" and "--quick" not in argv:
        argv.append("--quick")  # a full calibration measures for a minute
    case.argv = argv
    kept = {value for _, _, value in items}  # an output flag replaced or dropped asks for nothing
    case.outputs = tuple(name for value, name in paths.requested if value in kept)
    _prune(case)
    return case


def _prune(case: Case) -> None:
    """Drop the files no argument refers to (their values were replaced); run as a process only when a
    FIFO or a link to /dev/zero is still read (a NUL byte cannot be passed to a process)."""

    def used(name: str) -> bool:
        top = name.split("/")[0]
        return any("{W}/" + top in a or a in ("{W}", "{W}/") for a in case.argv)

    case.files = {k: v for k, v in case.files.items() if used(k)}
    if not any(isinstance(v, Special) and v.kind == "symlink" for v in case.files.values()):
        case.refuse = ""  # the link to be refused went with a replaced value: nothing reads it
    case.process = any(
        isinstance(v, Special) and (v.kind == "fifo" or v.arg == "/dev/zero") for v in case.files.values()
    )
    if case.process:
        case.argv = [a.replace("\x00", "") for a in case.argv]
