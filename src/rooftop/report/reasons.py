"""The words of the reasons library code returns as data (``rooftop.reasons``): each
:class:`~rooftop.reason_codes.ReasonCode`'s sentence from its figures, and each
:class:`~rooftop.reasons.Option` spelled as the command line's flag. The CLI and every report print
notes through :func:`note_text`, so the sentence of a code is written once, here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rooftop.errors import one_line, visible
from rooftop.reason_codes import ReasonCode
from rooftop.reasons import Note, Option, Part, Reason, said
from rooftop.report.plan_reasons import plan_sentences
from rooftop.units import format_bytes, format_percent


def flag(option: Option) -> str:
    """``Option("batch_tokens")`` -> ``"--batch-tokens"`` (argparse's rule from a flag to its dest)."""
    return "--" + option.name.replace("_", "-")


def _refused(r: Reason) -> str:
    parts: tuple[Part, ...] = r.figure("parts")  # type: ignore[assignment]  # Reason.of(REFUSED, parts=...)
    return one_line(visible(said(parts, flag, sentence)))


#: each code's sentence from its figures (``f`` reads one figure by name)
_SENTENCES: dict[ReasonCode, Callable[[Reason], str]] = {
    ReasonCode.REFUSED: _refused,
    ReasonCode.MESH_INFERRED: lambda r: (
        f"mesh {r.figure('mesh')} {note_text(r.figure('how'))} (give --mesh to name the axes)"  # type: ignore[arg-type]
    ),
    ReasonCode.TOPOLOGY_DEFAULT: lambda r: (
        f"topology {r.figure('topology')}: the default for {r.figure('devices')} {r.figure('chip')} (give --topology)"
    ),
    ReasonCode.NCCL_TOPOLOGY_DEFAULT: lambda r: (
        f"NCCL collectives over {r.figure('ranks')} ranks timed on topology "
        f"{r.figure('topology')}, the default for {r.figure('ranks')} {r.figure('chip')} (give --topology)"
    ),
    ReasonCode.GRAPH_REPLAY_NO_CAPTURE: lambda r: (
        f"{r.figure('left')} of the {r.figure('unexplained')} were replayed "
        "from CUDA/HIP graphs with no op shapes: no capture trace beside the profile: record one (vLLM and SGLang can "
        f"profile CUDA-graph capture into capture_traces/) and give it with --capture, or profile in "
        "eager mode (vLLM enforce_eager=True)"
    ),
    ReasonCode.HLO_JOINED_BUSIEST: lambda r: (
        f"--hlo module {r.figure('given')!r} joined with the profile's busiest module {r.figure('target')!r}"
    ),
    ReasonCode.HLO_MISSING: lambda r: (
        f"no HLO for module {r.figure('module')!r} in the profile (give --hlo to price its ops)"
    ),
    ReasonCode.NO_HLO: lambda r: (
        "no HLO available: ops have measured times only (give --hlo, or "
        "profile with JAX so the XPlane carries each module's HLO)"
    ),
    ReasonCode.HLO_MESH_UNUSED: lambda r: (
        "--hlo and --mesh are not used for a PyTorch trace (it is priced from its aten ops)"
    ),
    ReasonCode.TARGET_TOPOLOGY_DEFAULT: lambda r: (
        f"collectives on {r.figure('chip')} timed on its default topology "
        f"(--topology {r.figure('topology')} is {r.figure('source_chip')}'s)"
    ),
}


#: plan/'s codes (goals, the serving sweep, continuous batching, disaggregation): their words are in
#: report/plan_reasons.py, a reason they quote said through note_text
_SENTENCES.update(plan_sentences(lambda note: note_text(note)))


def _pct(x: object) -> str:
    return "-" if x is None else format_percent(float(x), 1)  # type: ignore[arg-type]  # a share or None


def _coverage(r: Reason) -> str:
    return (
        f"coverage: {_pct(r.figure('priced'))} of the op time priced, {_pct(r.figure('unpriced'))} not (ranked by "
        f"time below); graph-replayed {_pct(r.figure('graph_replayed'))}; device idle {_pct(r.figure('idle'))} of "
        "the steps' time"
    )


_HLO_FAILED = {"unusable": "in the profile is unusable", "unreadable": "could not be read",
               "unpriced": "in the profile could not be priced"}  # fmt: skip

_SENTENCES.update({
    ReasonCode.COVERAGE: _coverage,
    ReasonCode.DEVICE_FROM_PROFILE: lambda r: f"device from the profile: {r.figure('seen')!r} is catalog chip "
    f"{r.figure('chip')}",
    ReasonCode.DEVICE_WHAT_IF: lambda r: f"recorded on {r.figure('seen')!r} (catalog {r.figure('matched')}); priced "
    f"on {r.figure('chip')} as asked: the verdicts are a what-if for {r.figure('chip')}, not how well the ops ran",
    ReasonCode.DEVICE_UNMATCHED: lambda r: f"recorded on {r.figure('seen')!r}, which no catalog chip matches; priced "
    f"on {r.figure('chip')} as asked",
    ReasonCode.CPU_PROFILE: lambda r: f"this profile ran on the CPU and is judged against {r.figure('chip')}'s "
    "roofline: efficiencies say how far the CPU is from that chip, not how well the ops run (`rooftop calibrate` "
    "makes a chip file of this CPU)",
    ReasonCode.GROUPS_FROM_EVENTS: lambda r: f"{r.figure('module')}: replica groups of {r.figure('instruction')} read "
    f"from the profile's event text ({r.figure('groups')}): the HloProto had none",
    ReasonCode.GROUPS_ALL_DEVICES: lambda r: f"{r.figure('module')}: {r.figure('instruction')} names no replica "
    f"groups: all {r.figure('devices')} devices of the profile taken as one group",
    ReasonCode.GRAPH_REPLAY_UNMATCHED: lambda r: f"{r.figure('left')} of the {r.figure('unexplained')} were "
    "replayed from CUDA/HIP graphs with no op shapes: the capture trace has no op for them",
    ReasonCode.GRAPH_REPLAY_ATTRIBUTED: lambda r: f"{r.figure('kernels')} graph-replayed kernels attributed to their "
    f"ops from the capture trace {r.figure('capture')} ({r.figure('launches')} captured launches)",
    ReasonCode.GRAPH_REPLAY_SHARE: lambda r: f"graph-replayed share of the kernel time: {_pct(r.figure('share'))}",
    ReasonCode.KERNELS_PRICED: lambda r: f"PyTorch trace: {r.figure('priced')} of {r.figure('kernels')} kernels "
    "priced from the aten op that launched them (its Input Dims) or from their NCCL args; "
    f"{r.figure('unexplained')} launched by no op with Input Dims",
    ReasonCode.KERNELS_WITHOUT_LAUNCH: lambda r: f"{r.figure('kernels')} kernels without a launch in the trace "
    "(recorded before its host activity) priced as the ops they replay: a run of kernel names launched in that "
    "order on their stream, or a name one op signature alone launches, or (a collective) the call its stream's "
    "repeating collectives make at that place",
    ReasonCode.NO_INPUT_DIMS: lambda r: "no cpu_op carries Input Dims: record with "
    "torch.profiler.profile(record_shapes=True)",
    ReasonCode.HLO_FAILED: lambda r: f"HLO of {r.figure('module')!r} {_HLO_FAILED[str(r.figure('stage'))]}: "
    f"{r.figure('error')}",
})  # fmt: skip


def _command_buffer(r: Reason) -> str:
    f = dict(r.figures)
    text = (
        f"{f['module']}: {f['kernels']} kernels ran inside a CUDA graph ({f['buffer']}) that names no "
        f"instruction; {f['aligned']} of {f['replays']} replays were lined up with the module's schedule"
    )
    if f["unpriced"] is not None:
        text += (
            f"; in the others, kernels named after a fusion were attached to it by name and {f['unpriced']} "
            "library kernels stay unpriced (profile with XLA_FLAGS=--xla_gpu_enable_command_buffer= to see "
            "every op)"
        )
    return text


def _where(r: Reason) -> str:
    module = r.figure("module")
    return f"{module}: " if module else ""


# an op's "why" and the notes of analysis/ (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.OP_FASTER_THAN_ROOFLINE: lambda r: f"ran in {format_percent(r.figure('share'))} of its "  # type: ignore[arg-type]
    f"{r.figure('bound')} roofline time, which no op can: the chip's figures (datasheet or calibrated) or the op's "
    "FLOP/byte count are off (operands served from a cache, an assumed dtype, work the cost rule counts twice)",
    ReasonCode.OP_LATENCY_BOUND: lambda r: "small message: hop latency dominates its bandwidth time",
    ReasonCode.OP_EXPOSED: lambda r: f"only {format_percent(r.figure('share'))} of it overlaps compute on its "  # type: ignore[arg-type]
    "device",
    ReasonCode.OP_SLOW_HIDDEN: lambda r: "overlapped by compute but far from its bandwidth time",
    ReasonCode.OP_BELOW_ROOFLINE: lambda r: f"reaches {format_percent(r.figure('share'))} of its "  # type: ignore[arg-type]
    f"{r.figure('bound')} roofline",
    ReasonCode.OP_OVERLAPPED_WAIT: lambda r: f"waited {format_percent(r.figure('share'))} of its transfer's "  # type: ignore[arg-type]
    "roofline time: the transfer ran while other ops did, and only the wait at its done is measured",
    ReasonCode.OP_BOOKKEEPING: lambda r: "bookkeeping op the roofline prices at zero",
    ReasonCode.OP_SHAPE_QUANTIZED: lambda r: f"its shape uses {format_percent(r.figure('share'))} of the matrix "  # type: ignore[arg-type]
    "unit (tile and wave quantization)",
    ReasonCode.OP_NO_INSTRUCTION: lambda r: "the trace event names no HLO instruction",
    ReasonCode.OP_NO_MODULE_HLO: lambda r: f"no HLO for module {r.figure('module')!r} (the profile holds none; "
    "give --hlo)",
    ReasonCode.OP_NOT_TOP_LEVEL: lambda r: f"instruction {r.figure('instruction')!r} is not a top-level "
    f"instruction of {r.figure('module')}'s HLO",
    ReasonCode.OP_PRICED_ON_DONE: lambda r: f"its work is priced on {r.figure('done')}, the half that waits for it",
    ReasonCode.KERNEL_NO_LAUNCH: lambda r: "its launch (the runtime event of its correlation id) is not in the "
    "trace (record CPU activities too)",
    ReasonCode.KERNEL_GRAPH_REPLAYED: lambda r: "replayed from a CUDA/HIP graph (cudaGraphLaunch): a replay "
    "records no op shapes (profile the engine in eager mode, e.g. vLLM's enforce_eager=True, to price it)",
    ReasonCode.KERNEL_NO_INPUT_DIMS: lambda r: "no cpu_op with Input Dims encloses its launch (record the profile "
    "with record_shapes=True)",
    ReasonCode.COLLECTIVE_NO_WORLD: lambda r: f"{r.figure('op')}: a {r.figure('kind')} whose group the trace does "
    "not give (no distributedInfo world_size)",
    ReasonCode.NCCL_NO_GROUP_SIZE: lambda r: "the kernel names no Group size and the trace no world size",
    ReasonCode.COPY_NO_SIZE: lambda r: f"{r.figure('name')}: the trace gives no size for this copy",
    ReasonCode.WHILE_TRIPS_UNKNOWN: lambda r: f"while {r.figure('instruction')}: trip count unknown, body counted "
    "once",
    ReasonCode.CONDITIONAL_COSTLIEST: lambda r: f"conditional {r.figure('instruction')}: the costliest of "
    f"{r.figure('branches')} branches counted",
    ReasonCode.MEGACORE_ONE_CORE: lambda r: f"{r.figure('instructions')} instruction"
    f"{'s' if r.figure('instructions') != 1 else ''} named *in_megacore* run on one of the {r.figure('cores')} "
    f"TensorCores of a {r.figure('chip')}: timed at 1/{r.figure('cores')} of its peaks, HBM bandwidth and link "
    "bandwidth",
    ReasonCode.MEMORY_NOT_SCHEDULED: lambda r: "the module is not scheduled (is_scheduled=true): its text order "
    "taken as the run order; give the module after optimizations (compiled.as_text())",
    ReasonCode.MEMORY_BODIES_NOT_COUNTED: lambda r: f"{r.figure('calls')} while/conditional/call instruction(s): "
    "the temporaries of their bodies are not counted",
    ReasonCode.IDLE_NO_KERNELS: lambda r: "no kernels on device streams in this trace: nothing to break down",
    ReasonCode.IDLE_NO_LAUNCHES: lambda r: f"{r.figure('missing')} of {r.figure('kernels')} kernels have no launch "
    "in the trace (record CPU activities): their gaps count as other",
    ReasonCode.PHASES_NO_ANNOTATION: lambda r: "no engine step annotation (step[EXTEND ...], "
    "execute_..._context_..., prefill/decode) in this trace: no phases",
    ReasonCode.HOSTS_CLOCKS_ASSUMED: lambda r: "a host's profile does not say when it started: the hosts' clocks "
    "are taken as aligned for the skews and waits",
    ReasonCode.DIFF_CHIPS: lambda r: f"A is priced on {r.figure('a')} and B on {r.figure('b')}: the roofline delta "
    "includes the change of chip",
    ReasonCode.DIFF_STEP_BASES: lambda r: f"A's step time is its {r.figure('a')} and B's its {r.figure('b')}: the "
    "step delta mixes them",
    ReasonCode.STEPS_FROM_ENGINE: lambda r: f"{r.figure('steps')} step(s) from the engine's step annotations (no "
    "ProfilerStep markers): each from its annotation to the next, device idle included",
    ReasonCode.STEPS_ONE_SPAN: lambda r: "no step markers or engine step annotations: the trace's device span is "
    "one step",
    ReasonCode.COMMAND_BUFFER: _command_buffer,
    ReasonCode.KERNELS_NAMED_FUSION: lambda r: f"{_where(r)}{r.figure('given')} of {r.figure('kernels')} kernels "
    "without an hlo_op were given the fusion their name names",
    ReasonCode.KERNELS_NO_INSTRUCTION: lambda r: f"{_where(r)}{r.figure('kernels')} kernels carry no hlo_op and name "
    f"no instruction of a module with HLO (e.g. {r.figure('example')!r}, a runtime copy or a library kernel): "
    "listed by kernel name, unpriced",
})  # fmt: skip


def _chain(r: Reason) -> str:
    f: dict[str, Any] = dict(r.figures)
    at, more = f["at"], f["others"]
    where = f"on its start {at}" if f["on_start"] else f"at {at}, the first that holds it (no start)"
    held = (f"; {more} instruction{'s' if more > 1 else ''} of the chain hold{'' if more > 1 else 's'} it and "
            f"{'are' if more > 1 else 'is'} priced for their own work") if more else ""  # fmt: skip
    return f"async chain {f['chain']}: {f['opcode']} priced once, {where}{held}"


_SENTENCES[ReasonCode.CHAIN_PRICED_ONCE] = _chain


def _shape(dims: object) -> str:
    return "[" + ",".join(map(str, dims)) + "]"  # type: ignore[call-overload]  # a tuple of sizes (torch/op.py fmt_shape)


def _shapes(r: Reason) -> str:
    return " and ".join(_shape(d) for d in r.figure("shapes"))  # type: ignore[attr-defined]  # tuple of shapes


def _causal(r: Reason) -> str:
    return "causal" if r.figure("causal") else "not causal"


def _fused_attention(r: Reason) -> str:
    f: dict[str, Any] = dict(r.figures)
    return (f"fused attention {'backward (2.5x forward)' if f['backward'] else 'forward'}: 2 x B={f['b']} x "
            f"H={f['h']} x pairs={f['pairs']:g} x (D_qk={f['dqk']} + D_v={f['dv']}), {_causal(r)}"
            + (" (is_causal not recorded: priced not causal)" if f["causal"] is None else ""))  # fmt: skip


def _figures(r: Reason) -> dict[str, Any]:
    return dict(r.figures)


# what a PyTorch op was priced as, or why not (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.TORCH_NORM: lambda r: f"{'residual add and ' if r.figure('add') else ''}norm of "
    f"{_shape(r.figure('shape'))}: each tensor moved once",
    ReasonCode.TORCH_GATED_ACTIVATION: lambda r: f"gated activation: {_shape(r.figure('shape'))} written, its two "
    "halves read",
    ReasonCode.TORCH_ROTARY: lambda r: f"rotary embedding in place: {_shapes(r)} read and written",
    ReasonCode.TORCH_QUANTIZE: lambda r: f"quantization of {_shape(r.figure('shape'))}",
    ReasonCode.TORCH_CACHE_WRITE: lambda r: f"KV cache write: {_shapes(r)} read and written",
    ReasonCode.TORCH_ATTENTION: lambda r: "attention B={b} S_q={sq} S_k={sk} H={h}, ".format(**_figures(r))
    + _causal(r),
    ReasonCode.TORCH_PAGED_NO_LENGTHS: lambda r: f"{r.figure('op')}: packed attention {_shape(r.figure('shape'))} "
    "over a paged KV cache: the keys' lengths are not in its args and no step annotation gives them",
    ReasonCode.TORCH_PAGED_ATTENTION: lambda r: "paged attention: {requests} requests, {sq} queries over {sk} keys "
    "(step annotation), {pairs:g} causal pairs x H={heads} x (D_qk={dqk} + D_v={dv}), KV heads {kv_heads}"
    .format(**_figures(r)),
    ReasonCode.TORCH_GEMM: lambda r: "GEMM: 2 x M={m} x N={n} x K={k}".format(**_figures(r))
    + (" (weights fp4, two a byte)" if r.figure("fp4") else ""),
    ReasonCode.TORCH_MOE_NO_ARGS: lambda r: f"{r.figure('op')}: a fused MoE whose expert weights or routing are not "
    "among its args",
    ReasonCode.TORCH_MOE: lambda r: "fused MoE: T={tokens} tokens x top-{top_k} of E={experts} experts, H={hidden}, "
    "I={inter}: 2 x T x k x (one expert's weights) FLOPs; min(E, T k) = {reached} experts' weights read"
    .format(**_figures(r)),
    ReasonCode.TORCH_MEMORY_BOUND: lambda r: f"memory-bound: {r.figure('tensors')} tensor arguments moved once",
    ReasonCode.TORCH_ROTARY_CACHE: lambda r: "rotary embedding in place: q {q} and k {k} read and written, {tokens} "
    "cache rows read".format(**_figures(r)),
    ReasonCode.TORCH_CACHE_STORE: lambda r: "KV cache store: k {k} and v {v} read and written".format(**_figures(r)),
    ReasonCode.TORCH_BATCH_PREFILL: lambda r: "batch prefill attention: {sequences} sequences of {q_len} queries over "
    "{kv_len} keys (equal lengths assumed: a lower bound), H={heads}, KV heads {kv_heads}, pairs={pairs:g} per "
    "sequence and head, ".format(**_figures(r)) + _causal(r),
    ReasonCode.TORCH_MATMUL: lambda r: "matmul: 2 x " + " x ".join(f"{d}={n}" for d, n in r.figure("dims"))  # type: ignore[attr-defined]
    + (" + bias" if r.figure("bias") else ""),
    ReasonCode.TORCH_TRANSPOSED_CONV: lambda r: f"{r.figure('op')}: transposed convolution is not modelled",
    ReasonCode.TORCH_CONV_PARAMS_MISSING: lambda r: f"{r.figure('op')}: stride/padding/dilation/groups not recorded "
    "(needs Concrete Inputs)",
    ReasonCode.TORCH_CONV: lambda r: f"convolution {r.figure('rank')}-D, groups {r.figure('groups')}",
    ReasonCode.TORCH_CONV_BACKWARD: lambda r: f"convolution backward: {r.figure('grads')} x forward (grad input, "
    "grad weight)",
    ReasonCode.TORCH_VARLEN_ATTENTION: lambda r: f"{r.figure('op')}: variable-length (packed) attention "
    f"{_shape(r.figure('shape'))} is not modelled",
    ReasonCode.TORCH_FUSED_ATTENTION: _fused_attention,
    ReasonCode.TORCH_REDUCTION: lambda r: "reduction of {elements} to {out:g}".format(**_figures(r)),
    ReasonCode.TORCH_VECTOR: lambda r: "vector op: {flops:g} FLOP x {elements:g} elements; {reads} read + {writes} "
    "written".format(**_figures(r)),
    ReasonCode.TORCH_NO_RULE: lambda r: f"no cost rule for {r.figure('op')}",
    ReasonCode.TORCH_BY_FAMILY: lambda r: f"{note_text(r.figure('what'))} (priced by its family, "  # type: ignore[arg-type]
    f"{r.figure('family')}: {r.figure('op')} is not in the table of engine ops)",
    ReasonCode.NCCL_NO_COLLECTIVE: lambda r: "the NCCL kernel's args name no collective (PyTorch >= 2.3 records "
    "Collective name)",
    ReasonCode.NCCL_NO_RULE: lambda r: f"no collective rule for NCCL {r.figure('collective')}",
    ReasonCode.NCCL_ARGS: lambda r: "NCCL {collective}: its args lack {key!r} as a count in [0, 2**63 - 1] or a known "
    "dtype (got {count}, dtype {dtype})".format(**_figures(r)),
})  # fmt: skip


def _pallas_attention(r: Reason) -> str:
    f = _figures(r)
    if f["blocks"] is not None:
        pairs = f"{format_percent(f['blocks'], 1)} of the (query, key) blocks: {note_text(f['read'])}"
    elif f["causal"]:
        share = "none" if f["share"] is None else f"{format_percent(f['share'], 1)} of Sq x Sk"
        pairs = f"causal pairs ({share})"
    else:
        pairs = "every (query, key) pair (no block mask read)"
    return ("Pallas kernel {kernel}: {matmuls} attention matmuls ({phase}, from its operands and results), B={b} H={h} "
            "Sq={sq} Sk={sk} D={dqk}/{dv}, ".format(**f) + pairs)  # fmt: skip


# what an HLO cost rule read (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.HLO_FUSED_ATTENTION: lambda r: "fused attention {}, B={b} H={h} Sq={sq} Sk={sk} D={dqk}/{dv}, "
    .format("backward (2.5x forward)" if r.figure("backward") else "forward", **_figures(r))
    + ("" if r.figure("causal") else "not ") + "causal",
    ReasonCode.PALLAS_ATTENTION: _pallas_attention,
    ReasonCode.PALLAS_COST_ESTIMATE: lambda r: f"Pallas kernel {r.figure('kernel')}: FLOPs from its cost_estimate",
    ReasonCode.IN_PLACE_ALIASED: lambda r: f"in place: the output is aliased to operand {r.figure('operand')} (the "
    "update's tiles written)",
    ReasonCode.IN_PLACE_ON_COPY: lambda r: f"in place on {r.figure('copy')}, the copy XLA inserted (the copy moves "
    "the buffer)",
    ReasonCode.NOT_IN_PLACE: lambda r: f"not in place: the loop-carried buffer (while tuple element "
    f"{r.figure('element')}) is not aliased to the output, so the whole buffer is read and written",
})  # fmt: skip


# where a module's mesh came from (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.MESH_FROM_TEXT: lambda r: "inferred from the mesh[...] replica-group form in the text",
    ReasonCode.MESH_FROM_GROUPS: lambda r: f"inferred from the replica groups of {r.figure('collectives')} "
    "collective(s)" + ("" if r.figure("distinct") is None else f", {r.figure('distinct')} distinct"),
    ReasonCode.BLOCK_MASK: lambda r: "block mask {mask} ({dtype}[{shape}]): {live} of {blocks} blocks live".format(
        shape=",".join(map(str, r.figure("dims"))), **_figures(r)  # type: ignore[call-overload]  # a tuple of sizes
    ),
    ReasonCode.SHARDING_MESH: lambda r: f"{r.figure('module')}: mesh {r.figure('mesh')} "
    f"({note_text(r.figure('how'))})",  # type: ignore[arg-type]
})  # fmt: skip


def _window(f: dict[str, Any], words: str = "") -> str:
    return f", window {f['window']}{words}" if f["window"] else ""


_EQUAL = " (equal lengths assumed: a lower bound)"


def _packed_attention(r: Reason) -> str:
    f = _figures(r)
    return (f"attention{' backward' if f['backward'] else ''}: {note_text(f['keys'])}, {f['pairs']:g} pairs x "
            f"H={f['heads']} x (D_qk={f['dqk']} + D_v={f['dv']}), KV heads {f['kv_heads']}, {_causal(r)}")  # fmt: skip


def _quant_gemm(r: Reason) -> str:
    f = _figures(r)
    return (f"{'grouped ' if f['grouped'] else ''}GEMM: 2 x M={f['m']} x N={f['n']} x K={f['k']}"
            + (f" over {f['experts']} experts, min(E, M) = {f['reached']} experts' weights read" if f["grouped"]
               else "")
            + (" (fp4: two values a byte)" if f["fp4"]
               else f" (weight {f['dtype']} {_shape(f['weight'])})"))  # fmt: skip


def _deltanet(r: Reason) -> str:
    f = _figures(r)
    how = ("{run} tokens of {sequences} sequences, {chunked} prefill tokens in chunks of {chunk} (step annotation)"
           .format(**f) if f["annotated"]
           else "sequences not recorded: one assumed (a lower bound on state traffic), recurrence only")  # fmt: skip
    return ("gated DeltaNet: T={tokens} tokens, H_k={key_heads} H_v={value_heads} d_k=d_v={dv} (d_k assumed = d_v), "
            "{taps}-tap conv over {channels} channels, {flops:g} d_k d_v FLOPs a head and token; "
            .format(**f) + how)  # fmt: skip


def _moved(word: str) -> Callable[[Reason], str]:
    return lambda r: f"{word}: {_shape(r.figure('shape'))} read and written"


# what an engine op's schema rule priced, or why not (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.TORCH_DENSE_ATTENTION: lambda r: "attention{} B={b} S_q={sq} S_k={sk} H={h} D_qk={dqk} D_v={dv}, "
    .format(" backward" if r.figure("backward") else "", **_figures(r)) + _causal(r) + _window(_figures(r)),
    ReasonCode.TORCH_PACKED_ATTENTION: _packed_attention,
    ReasonCode.TORCH_KEYS_ANNOTATED: lambda r: "{requests} requests, {sq} queries over {sk} keys".format(**_figures(r))
    + _window(_figures(r), " (at most sq x W pairs)") + " (step annotation)",
    ReasonCode.TORCH_KEYS_PACKED: lambda r: "{sequences} sequences over {keys} packed keys".format(**_figures(r))
    + _window(_figures(r)) + _EQUAL,
    ReasonCode.TORCH_KEYS_PAGED: lambda r: "{sequences} sequences over at least {keys:g} keys ({pages} pages of "
    "{page}, each last page used once)".format(**_figures(r)) + _window(_figures(r)) + _EQUAL,
    ReasonCode.TORCH_ATTENTION_NO_SEQUENCES: lambda r: f"{r.figure('op')}: attention of {_shape(r.figure('shape'))} "
    "queries: the number of sequences is in no argument's shape",
    ReasonCode.TORCH_ATTENTION_KEYS_IN_VALUES: lambda r: f"{r.figure('op')}: attention of {_shape(r.figure('shape'))} "
    "queries: its keys' lengths are values in a tensor (seq_lens), not shapes, and no step annotation gives them",
    ReasonCode.TORCH_QUANT_GEMM: _quant_gemm,
    ReasonCode.TORCH_MOE_NOT_RECORDED: lambda r: f"{r.figure('op')}: a fused MoE whose top-k or activations are not "
    "recorded",
    ReasonCode.TORCH_CONV1D: lambda r: "causal conv1d{}: {tokens:g} tokens x D={channels} channels x W={taps} taps{}, "
    "{sequences} sequences' conv state read and written".format(" update" if r.figure("update") else "",
                                                                " + SiLU" if r.figure("silu") else "", **_figures(r)),
    ReasonCode.TORCH_CONV1D_BACKWARD: lambda r: "causal conv1d backward: {tokens:g} tokens x D={channels} x W={taps}, "
    "2 x the forward FLOPs".format(**_figures(r)),
    ReasonCode.TORCH_SELECTIVE_SCAN: lambda r: "selective scan (Mamba): {tokens:g} tokens x D={channels} channels x "
    "N={states} states x {flops:g} FLOPs, {sequences} sequences' state read and written".format(**_figures(r)),
    ReasonCode.TORCH_GATED_DELTANET: _deltanet,
    ReasonCode.TORCH_LIGHTNING_DECODE: lambda r: "lightning attention decode: B={b} x H={h} x {steps} tokens over a "
    "D={d} x E={e} state, {flops:g} D E FLOPs each".format(**_figures(r)),
    ReasonCode.TORCH_MAMBA2_MIXER_OPAQUE: lambda r: f"{r.figure('op')}: Mamba-2 mixer: projected_states [T, 2 d_inner "
    "+ 2 G N + H] and output [T, d_inner] do not separate the state size N from the groups G and heads H",
    ReasonCode.TORCH_DELTANET_LAYER_OPAQUE: lambda r: f"{r.figure('op')}: gated DeltaNet layer: its args hold the "
    "hidden states [T, d_model], not the heads",
    ReasonCode.TORCH_INDEX_SELECT: _moved("index_select"),
    ReasonCode.TORCH_EMBEDDING: _moved("embedding lookup"),
    ReasonCode.TORCH_GATHER: _moved("gather"),
    ReasonCode.TORCH_EMBEDDING_BACKWARD: lambda r: f"embedding gradient: {_shape(r.figure('out'))} written, "
    f"{_shape(r.figure('grad'))} accumulated into it",
    ReasonCode.TORCH_NLL_LOSS: lambda r: f"nll_loss: one of {_shape(r.figure('logits'))} read per row",
    ReasonCode.TORCH_NLL_LOSS_BACKWARD: lambda r: f"nll_loss gradient: {_shape(r.figure('logits'))} written",
})  # fmt: skip


# why a PyTorch op's recorded arguments cannot be read (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.TORCH_INPUT_DIMS: lambda r: "{op}: Input Dims argument {argument} {dims}: ".format(**_figures(r))
    + note_text(r.figure("why")),  # type: ignore[arg-type]
    ReasonCode.DIMS_NOT_COUNTS: lambda r: "sizes are integers in [0, 2**63 - 1]",
    ReasonCode.DIMS_TOO_MANY_ELEMENTS: lambda r: "the sizes multiply to more than 2**63 - 1 elements",
    ReasonCode.DIMS_LIST_NOT_SHAPES: lambda r: "a TensorList has a list of shapes",
    ReasonCode.DIMS_MIXED: lambda r: "sizes and lists of sizes mixed",
    ReasonCode.DIMS_SHAPES_FOR_TENSOR: lambda r: "a list of shapes for a tensor",
})  # fmt: skip


def _groups(r: Reason) -> str:
    """ "all-reduce over model (groups of 2, stride 1)" or "all-gather: irregular groups {0,3},{1,2}"."""
    f = _figures(r)
    kind, axes, strides = f["kind"], f["axes"], f["strides"]
    if axes is None:
        shown = ",".join("{" + ",".join(map(str, g)) + "}" for g in f["groups"])
        more = f",... ({f['count']} groups)" if f["count"] > 8 else ""
        return f"{kind}: irregular {'pairs' if f['pairs'] else 'groups'} {shown}{more}"
    what = f"{f['num_groups']} pairs" if f["pairs"] else f"groups of {f['group_size']}"
    if not axes:
        return f"{kind} over no axis ({what}): nothing moves"
    stride = ",".join(map(str, strides))
    return f"{kind} over {','.join(axes)} ({what}, stride{'s' if len(strides) > 1 else ''} {stride})"


# a collective in words (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.COLLECTIVE_GROUPS: _groups,
    ReasonCode.COLLECTIVE_NOT_TIMED: lambda r: _groups(r) + ": not timed",
    ReasonCode.COLLECTIVE_OVER_RANKS: lambda r: f"{r.figure('kind')} of {format_bytes(r.figure('bytes'))} over "  # type: ignore[arg-type]
    f"{r.figure('ranks')} ranks ({r.figure('topology')})" + (", the trace's world" if r.figure("world") else ""),
})  # fmt: skip


# a PyTorch op whose rule raised (appended at the end of the table)
_SENTENCES.update({
    ReasonCode.TORCH_RULE_ERROR: lambda r: "{op} ({family}): {error}".format(**_figures(r)),
    ReasonCode.TORCH_ARGS_ERROR: lambda r: "{op} {args}: {error}".format(**_figures(r)),
    ReasonCode.TORCH_COLLECTIVE_ERROR: lambda r: "{op}: {error}".format(**_figures(r)),
    ReasonCode.NCCL_NO_TOPOLOGY: lambda r: "no topology of {ranks} {chip}: {error}".format(**_figures(r)),
})  # fmt: skip


def sentence(reason: Reason) -> str:
    """The sentence a report prints for ``reason``."""
    return _SENTENCES[reason.code](reason)


def note_text(note: Note) -> str:
    """A note as printed: a Reason's sentence, or a note that is still a sentence as it is."""
    return note if isinstance(note, str) else sentence(note)


def note_texts(notes: Iterable[Note]) -> list[str]:
    return [note_text(n) for n in notes]


def collective_text(collective: Iterable[Note] | None) -> str | None:
    """An op's collective (``OpReport.collective``) in words: its parts' sentences joined by "; "."""
    return None if collective is None else "; ".join(note_text(c) for c in collective)


def sharding_texts(sharding: Iterable[Note]) -> list[str]:
    """A profile's sharding lines: each module's mesh, then its distinct collectives in order of their words."""
    lines: list[str] = []
    seen: set[str] = set()
    for note in sharding:
        if isinstance(note, Reason) and note.code is ReasonCode.SHARDING_MESH:
            lines += sorted(seen)
            seen = set()
            lines.append(sentence(note))
        else:
            seen.add(note_text(note))
    return lines + sorted(seen)


def why_text(parts: Iterable[Note]) -> str:
    """An op's "why" (``OpReport.why``, its parts) as one text: the parts' sentences joined by "; "."""
    return "; ".join(note_text(p) for p in parts)
