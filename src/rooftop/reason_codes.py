"""The codes of :class:`rooftop.reasons.Reason`: what a note on a result or an error says, one member per
kind of note, each with the figures it names. ``report/reasons.py`` (and ``report/plan_reasons.py``) hold one
sentence per code; a test checks that every code has one."""

from __future__ import annotations

from enum import Enum


class ReasonCode(Enum):
    """What a note on a result says; its figures are listed next to each code."""

    #: an error's message, kept as data in a result (figures: parts, the error's text and options)
    REFUSED = "refused"

    # plan/: goals and serving sweeps (a Trial figure is a plan.goal.train.Trial: its chips, topology, days, note)
    #: the smallest valid slice meeting a training goal (figures: found, smaller: Trials, smaller None when none)
    GOAL_MET = "goal-met"
    #: no slice of the chip meets a training goal (figures: chip, most: chips of the largest slice, fastest:
    #: the fastest Trial timed or None, last: the last Trial tried or None)
    GOAL_UNMET = "goal-unmet"
    #: the slice meeting the days (or the cheapest) costs more than the goal (figures: max_days or None,
    #: found: Trial, max_cost_usd)
    GOAL_OVER_BUDGET = "goal-over-budget"
    #: a slice tried for a goal on which no layout fits in memory (no figures)
    NO_LAYOUT_FITS = "no-layout-fits"
    #: a slice tried for a goal with no valid layout (no figures)
    NO_VALID_LAYOUT = "no-valid-layout"
    #: no layout of the chip meets a serving goal at any replica count (figures: chip)
    SERVE_GOAL_UNMET = "serve-goal-unmet"
    #: the chip has no price: serving cost is null (figures: chip)
    NO_PRICE = "no-price"
    #: prompt + generation is longer than the model's context (figures: tokens, model, max_seq_len)
    CONTEXT_OVER_MAX = "context-over-max"
    #: a serving layout the slice cannot hold as a mesh (figures: layout, error)
    LAYOUT_SKIPPED = "layout-skipped"
    #: TP groups of swept layouts span fast domains (NVLink domains, slices) (figures: layouts: (label,
    #: domains, chips in each) of those named, more: how many others, split: some under attn_dp or kv_batch,
    #: all_reduces per layer, switched: GPUs, dcn_bytes_per_s, scaleout_latency_s, ici_bytes_per_s)
    TP_CROSSES_DOMAINS = "tp-crosses-domains"
    #: pipeline stages of swept layouts span fast domains (figures: layouts: (label, domains, stages in each),
    #: more, switched, dcn_bytes_per_s, scaleout_latency_s, ici_bytes_per_s)
    PP_CROSSES_DOMAINS = "pp-crosses-domains"

    # plan/serve/disagg.py: disaggregated prefill/decode pools against colocated serving
    #: no layout meets the latency targets either way (no figures)
    DISAGG_NONE = "disagg-none"
    #: no prefill/decode split meets the targets (no figures)
    DISAGG_NO_SPLIT = "disagg-no-split"
    #: colocated serving cannot meet the targets (no figures)
    COLOCATED_MISSES = "colocated-misses"
    #: the split takes fewer chips (figures: prefill, decode, colocated: chips of each pool)
    DISAGG_FEWER_CHIPS = "disagg-fewer-chips"
    #: colocated serving takes no more chips (figures: prefill, decode, colocated)
    COLOCATED_FEWER_CHIPS = "colocated-fewer-chips"
    #: prefill on one chip and decode on another: no split meets the targets (figures: prefill_chip, decode_chip)
    SPLIT_NONE = "split-none"
    #: prefill on one chip and decode on another: colocated serving misses (figures: prefill_chip, decode_chip)
    SPLIT_COLOCATED_MISSES = "split-colocated-misses"
    #: the two chips' pools against colocated serving in dollars per hour (figures: prefill_chip, decode_chip,
    #: prefill, decode, colocated, usd_per_hour, colocated_usd_per_hour)
    SPLIT_DOLLARS = "split-dollars"
    #: the two chips' pools against colocated serving in chips, with no price (figures: prefill_chip,
    #: decode_chip, prefill, decode, colocated)
    SPLIT_CHIPS = "split-chips"
    #: a recommendation and the KV cache moved per request (figures: reason, bytes, seconds, chip: whose
    #: data-center links, None for the slower of two chips)
    KV_TRANSFER = "kv-transfer"
    #: a chip whose matrix unit has no peak for the matmuls' dtype: priced at a wider one (figures: chip,
    #: wanted, weights, activations, used, peak in FLOP/s)
    NO_MATRIX_PEAK = "no-matrix-peak"

    # plan/serve/sweep.py: why each point takes its time, what limits each layout, which point is chosen
    #: a point whose batch does not fit in memory (figures: memory, a ChipMemory)
    POINT_NO_FIT = "point-no-fit"
    #: a decode step bound by HBM reads (figures: weights_bytes, weights_s, kv_cache_bytes, kv_cache_s)
    MEMORY_BOUND = "memory-bound"
    #: a decode step bound by the matrix unit (figures: flops, compute_s: per chip per step)
    COMPUTE_BOUND = "compute-bound"
    #: a decode step bound by the collectives' latency (figures: collectives, collective_s)
    COLLECTIVE_BOUND = "collective-bound"
    #: a decode step bound by its fixed costs (figures: launch_s, scheduling_s)
    FIXED_COSTS = "fixed-costs"
    #: the largest batch swept of a layout: the point's reason and the layout's (figures: point, layout)
    LARGEST_SWEPT = "largest-swept"
    #: a layout that cannot hold one sequence (figures: memory)
    LAYOUT_NO_FIT = "layout-no-fit"
    #: a layout compute-bound from a batch its memory allows (figures: batch, fit, context, memory)
    LAYOUT_COMPUTE_BOUND = "layout-compute-bound"
    #: a layout whose batch is capped below what its memory holds (figures: cap, fit)
    LAYOUT_BATCH_CAP = "layout-batch-cap"
    #: a layout whose batch is as large as its memory holds (figures: fit, context, memory, compute_bound_batch)
    LAYOUT_MEMORY_CAPACITY = "layout-memory-capacity"
    #: no layout and batch fits in memory (no figures)
    NO_POINT_FITS = "no-point-fits"
    #: no point meets the latency targets (figures: max_step_s, max_ttft_s, the fastest step_s with its layout
    #: and batch, the fastest ttft_s)
    NO_POINT_MEETS = "no-point-meets"
    #: the point chosen (figures: max_step_s, max_ttft_s, layout, batch, tokens_per_s_per_chip, step_s)
    CHOSEN = "chosen"
    #: the static sweep's choice, kept as a note under a load (figures: chosen: bool, reason)
    STATIC_CHOICE = "static-choice"
    #: no layout chosen under the load (figures: reason, continuous batching's)
    UNDER_LOAD = "under-load"
    #: a layout saturated by the load: the queue grows without bound (figures: requests_per_s, sustained by
    #: the slice, replicas, per_replica)
    SATURATED = "saturated"
    #: a KV pool that cannot hold one request to its last token (no figures)
    KV_POOL_TOO_SMALL = "kv-pool-too-small"
    #: a layout's steady state under the load (figures: requests_per_s and share of the sustained rate, or
    #: clients per replica and the requests/s served; sustained, decode_batch, prefill_tokens per step;
    #: blocks_used (a share), blocks and preemptions with a KV block pool, else None)
    UNDER_LOAD_STEADY = "under-load-steady"
    #: continuous batching: no layout holds the model and one sequence (no figures)
    NO_LAYOUT_HOLDS = "no-layout-holds"
    #: continuous batching: every layout saturated (figures: most: the highest requests/s any sustains, layout)
    ALL_SATURATED = "all-saturated"
    #: continuous batching: no unsaturated layout meets the latency targets (no figures)
    NONE_MEETS_UNDER_LOAD = "none-meets-under-load"
    #: continuous batching at a rate chose the lowest mean request latency under the targets (figures: layout)
    LOWEST_LATENCY = "lowest-latency"
    #: continuous batching at a concurrency chose the most output tokens/s under the targets (figures: layout)
    MOST_TOKENS = "most-tokens"
    #: the layout continuous batching chose under the load (figures: requests_per_s or None, concurrency,
    #: reason, tpot_s, ttft_s, running sequences per replica, batch shown)
    UNDER_LOAD_CHOSEN = "under-load-chosen"

    #: the mesh was inferred from the replica groups (figures: mesh, how)
    MESH_INFERRED = "mesh-inferred"
    #: the topology is the chip's default for the device count (figures: topology, devices, chip)
    TOPOLOGY_DEFAULT = "topology-default"
    #: NCCL collectives timed on a default topology (figures: ranks, topology, chip)
    NCCL_TOPOLOGY_DEFAULT = "nccl-topology-default"
    #: graph-replayed kernels with no op shapes and no capture trace (figures: left, unexplained)
    GRAPH_REPLAY_NO_CAPTURE = "graph-replay-no-capture"
    #: graph-replayed kernels with no op shapes that the capture trace has no op for (figures: left, unexplained)
    GRAPH_REPLAY_UNMATCHED = "graph-replay-unmatched"
    #: graph-replayed kernels attributed from a capture trace (figures: kernels, capture, launches)
    GRAPH_REPLAY_ATTRIBUTED = "graph-replay-attributed"
    #: the share of the kernel time replayed from graphs (figures: share)
    GRAPH_REPLAY_SHARE = "graph-replay-share"
    #: a PyTorch trace's kernels priced from their launching op or NCCL args (figures: priced, kernels, unexplained)
    KERNELS_PRICED = "kernels-priced"
    #: kernels without a launch priced as the ops they replay (figures: kernels)
    KERNELS_WITHOUT_LAUNCH = "kernels-without-launch"
    #: no cpu_op of a PyTorch trace carries its input shapes (no figures)
    NO_INPUT_DIMS = "no-input-dims"
    #: the given HLO module joined with the profile's busiest one (figures: given, target)
    HLO_JOINED_BUSIEST = "hlo-joined-busiest"
    #: a module of the profile carries no HLO (figures: module)
    HLO_MISSING = "hlo-missing"
    #: no HLO at all: ops have measured times only (no figures)
    NO_HLO = "no-hlo"
    #: HLO and mesh given for a PyTorch trace, which does not use them (no figures)
    HLO_MESH_UNUSED = "hlo-mesh-unused"
    #: collectives on the target chip timed on its default topology (figures: chip, topology, source_chip)
    TARGET_TOPOLOGY_DEFAULT = "target-topology-default"
    #: how much of a profile is explained: shares in [0, 1] or None (figures: priced, unpriced,
    #: graph_replayed, idle)
    COVERAGE = "coverage"
    #: the profile's device matched a catalog chip, and it is the chip priced on (figures: seen, chip)
    DEVICE_FROM_PROFILE = "device-from-profile"
    #: the profile's device matched a catalog chip, but another was asked for (figures: seen, matched, chip)
    DEVICE_WHAT_IF = "device-what-if"
    #: the profile's device matches no catalog chip (figures: seen, chip)
    DEVICE_UNMATCHED = "device-unmatched"
    #: a profile that ran on the CPU judged against an accelerator's roofline (figures: chip)
    CPU_PROFILE = "cpu-profile"
    #: a collective's replica groups read from the event text, not the HloProto (figures: module,
    #: instruction, groups)
    GROUPS_FROM_EVENTS = "groups-from-events"
    #: a collective that names no replica groups: all devices taken as one (figures: module, instruction, devices)
    GROUPS_ALL_DEVICES = "groups-all-devices"
    #: a module's HLO in the profile could not be taken, read or priced (figures: module, stage, error;
    #: stage one of "unusable", "unreadable", "unpriced")
    HLO_FAILED = "hlo-failed"

    # --- an op's "why" (OpReport.why) and the notes of analysis/ (appended here: t27a) ---
    #: an op faster than its roofline allows (figures: share, of the roofline time it ran in; bound)
    OP_FASTER_THAN_ROOFLINE = "op-faster-than-roofline"
    #: a slow collective whose estimate is latency-bound (no figures)
    OP_LATENCY_BOUND = "op-latency-bound"
    #: a slow collective mostly not overlapped by compute (figures: share, of it overlapped)
    OP_EXPOSED = "op-exposed"
    #: a slow collective overlapped by compute (no figures)
    OP_SLOW_HIDDEN = "op-slow-hidden"
    #: an op below its roofline (figures: share, the efficiency; bound)
    OP_BELOW_ROOFLINE = "op-below-roofline"
    #: the done of an async pair that waited less than its transfer (figures: share, of the transfer's time)
    OP_OVERLAPPED_WAIT = "op-overlapped-wait"
    #: an op the roofline prices at zero (no figures)
    OP_BOOKKEEPING = "op-bookkeeping"
    #: a compute-bound matmul whose shape fills the matrix unit badly (figures: share, of the unit used)
    OP_SHAPE_QUANTIZED = "op-shape-quantized"
    #: a trace event that names no HLO instruction (no figures)
    OP_NO_INSTRUCTION = "op-no-instruction"
    #: an op of a module without HLO (figures: module)
    OP_NO_MODULE_HLO = "op-no-module-hlo"
    #: an op whose instruction is not a top-level one of its module (figures: instruction, module)
    OP_NOT_TOP_LEVEL = "op-not-top-level"
    #: the start of an async pair, priced on its done (figures: done)
    OP_PRICED_ON_DONE = "op-priced-on-done"
    #: a kernel whose launch is not in the trace (no figures)
    KERNEL_NO_LAUNCH = "kernel-no-launch"
    #: a kernel replayed from a CUDA/HIP graph (no figures)
    KERNEL_GRAPH_REPLAYED = "kernel-graph-replayed"
    #: a kernel launched by no cpu_op with Input Dims (no figures)
    KERNEL_NO_INPUT_DIMS = "kernel-no-input-dims"
    #: a collective op whose group the trace does not give (figures: op, kind)
    COLLECTIVE_NO_WORLD = "collective-no-world"
    #: an NCCL kernel whose group size is unknown (no figures)
    NCCL_NO_GROUP_SIZE = "nccl-no-group-size"
    #: a memcpy the trace gives no size for (figures: name)
    COPY_NO_SIZE = "copy-no-size"
    #: a while loop of unknown trip count, its body counted once (figures: instruction)
    WHILE_TRIPS_UNKNOWN = "while-trips-unknown"
    #: a conditional priced by its costliest branch (figures: instruction, branches)
    CONDITIONAL_COSTLIEST = "conditional-costliest"
    #: instructions of a megacore chip that run on one core (figures: instructions, cores, chip)
    MEGACORE_ONE_CORE = "megacore-one-core"
    #: a module that is not scheduled: its text order is the run order (no figures)
    MEMORY_NOT_SCHEDULED = "memory-not-scheduled"
    #: called computations whose temporaries the memory peak leaves out (figures: calls)
    MEMORY_BODIES_NOT_COUNTED = "memory-bodies-not-counted"
    #: a trace with no kernel on a device stream (no figures)
    IDLE_NO_KERNELS = "idle-no-kernels"
    #: kernels whose launch is not in the trace (figures: missing, kernels)
    IDLE_NO_LAUNCHES = "idle-no-launches"
    #: a trace with no engine step annotation (no figures)
    PHASES_NO_ANNOTATION = "phases-no-annotation"
    #: hosts whose profiles do not say when they started (no figures)
    HOSTS_CLOCKS_ASSUMED = "hosts-clocks-assumed"
    #: two runs priced on different chips (figures: a, b)
    DIFF_CHIPS = "diff-chips"
    #: two runs whose step times are measured differently (figures: a, b)
    DIFF_STEP_BASES = "diff-step-bases"
    #: a PyTorch trace's steps from its engine's annotations (figures: steps)
    STEPS_FROM_ENGINE = "steps-from-engine"
    #: a PyTorch trace with no step marker: one step (no figures)
    STEPS_ONE_SPAN = "steps-one-span"
    #: kernels of a command buffer lined up with the schedule (figures: module, kernels, buffer, aligned,
    #: replays, unpriced; unpriced None when every replay lined up)
    COMMAND_BUFFER = "command-buffer"
    #: kernels without an hlo_op given the fusion they name (figures: module, given, kernels)
    KERNELS_NAMED_FUSION = "kernels-named-fusion"
    #: kernels without an hlo_op that name no instruction (figures: module, kernels, example)
    KERNELS_NO_INSTRUCTION = "kernels-no-instruction"
    #: the collective of an async chain priced once (figures: chain, opcode, at, on_start: whether ``at`` is
    #: the chain's start, others: the other instructions of the chain that hold it)
    CHAIN_PRICED_ONCE = "chain-priced-once"

    # --- what a PyTorch op was priced as, or why not (analysis/torch: Price.what); shapes are tuples of sizes ---
    #: a norm (figures: add, a residual add with it; shape)
    TORCH_NORM = "torch-norm"
    #: a gated activation (figures: shape, of the output)
    TORCH_GATED_ACTIVATION = "torch-gated-activation"
    #: a rotary embedding in place (figures: shapes, of the tensors rotated)
    TORCH_ROTARY = "torch-rotary"
    #: a quantization (figures: shape, of the input)
    TORCH_QUANTIZE = "torch-quantize"
    #: a KV cache write (figures: shapes, of the new keys and values)
    TORCH_CACHE_WRITE = "torch-cache-write"
    #: attention over 4-D q/k/v (figures: b, sq, sk, h, causal)
    TORCH_ATTENTION = "torch-attention"
    #: packed attention over a paged cache with no lengths (figures: op, shape)
    TORCH_PAGED_NO_LENGTHS = "torch-paged-no-lengths"
    #: packed attention priced from the step's annotation (figures: requests, sq, sk, pairs, heads, dqk, dv,
    #: kv_heads)
    TORCH_PAGED_ATTENTION = "torch-paged-attention"
    #: a GEMM (figures: m, n, k, fp4: weights packed two a byte)
    TORCH_GEMM = "torch-gemm"
    #: a fused MoE whose weights or routing are not among its args (figures: op)
    TORCH_MOE_NO_ARGS = "torch-moe-no-args"
    #: a fused MoE (figures: tokens, top_k, experts, hidden, inter, reached: experts whose weights are read)
    TORCH_MOE = "torch-moe"
    #: an op that moves its tensors once (figures: tensors)
    TORCH_MEMORY_BOUND = "torch-memory-bound"
    #: an engine's rotary embedding with a cos/sin cache (figures: q, k, tokens)
    TORCH_ROTARY_CACHE = "torch-rotary-cache"
    #: an engine's KV cache store (figures: k, v)
    TORCH_CACHE_STORE = "torch-cache-store"
    #: a batch prefill attention (figures: sequences, q_len, kv_len, heads, kv_heads, pairs, causal)
    TORCH_BATCH_PREFILL = "torch-batch-prefill"
    #: a matmul (figures: dims, (name, size) pairs; bias)
    TORCH_MATMUL = "torch-matmul"
    #: a transposed convolution, not modelled (figures: op)
    TORCH_TRANSPOSED_CONV = "torch-transposed-conv"
    #: a convolution whose stride, padding, dilation or groups are not recorded (figures: op)
    TORCH_CONV_PARAMS_MISSING = "torch-conv-params-missing"
    #: a convolution (figures: rank, groups)
    TORCH_CONV = "torch-conv"
    #: a convolution's backward (figures: grads, forwards it costs)
    TORCH_CONV_BACKWARD = "torch-conv-backward"
    #: a variable-length attention, not modelled (figures: op, shape)
    TORCH_VARLEN_ATTENTION = "torch-varlen-attention"
    #: a fused attention (figures: backward, b, h, pairs, dqk, dv, causal: None when not recorded)
    TORCH_FUSED_ATTENTION = "torch-fused-attention"
    #: a reduction (figures: elements, out)
    TORCH_REDUCTION = "torch-reduction"
    #: a vector op (figures: flops, per element; elements, reads, writes)
    TORCH_VECTOR = "torch-vector"
    #: an op no rule prices (figures: op)
    TORCH_NO_RULE = "torch-no-rule"
    #: an engine op priced by its family, not in the table (figures: what, its price's note; family, op)
    TORCH_BY_FAMILY = "torch-by-family"
    #: an NCCL kernel whose args name no collective (no figures)
    NCCL_NO_COLLECTIVE = "nccl-no-collective"
    #: an NCCL collective without a rule (figures: collective)
    NCCL_NO_RULE = "nccl-no-rule"
    #: an NCCL kernel whose count or dtype is missing (figures: collective, key, count, dtype: as shown)
    NCCL_ARGS = "nccl-args"

    # --- what an HLO cost rule read (InstructionCost.note) ---
    #: a fused attention custom-call (figures: backward, b, h, sq, sk, dqk, dv, causal)
    HLO_FUSED_ATTENTION = "hlo-fused-attention"
    #: a Pallas attention kernel (figures: kernel, matmuls, phase, b, h, sq, sk, dqk, dv; blocks, the share of
    #: (query, key) blocks a mask keeps, and read, how it was read, or None; causal and share, of Sq x Sk)
    PALLAS_ATTENTION = "pallas-attention"
    #: a Pallas kernel's FLOPs from its cost_estimate (figures: kernel)
    PALLAS_COST_ESTIMATE = "pallas-cost-estimate"
    #: an update in place: the output aliased to an operand (figures: operand)
    IN_PLACE_ALIASED = "in-place-aliased"
    #: an update in place on the copy XLA inserted (figures: copy)
    IN_PLACE_ON_COPY = "in-place-on-copy"
    #: an update not in place: a loop-carried buffer not aliased (figures: element, of the while tuple)
    NOT_IN_PLACE = "not-in-place"

    # --- where a module's mesh came from (LogicalMesh.how) and a profile's sharding line ---
    #: a mesh read from the mesh[...] form of the replica groups (no figures)
    MESH_FROM_TEXT = "mesh-from-text"
    #: a mesh inferred from the replica groups (figures: collectives; distinct patterns, None when one)
    MESH_FROM_GROUPS = "mesh-from-groups"
    #: a module's mesh in a profile's sharding lines (figures: module, mesh, how: "given" or a Reason)
    SHARDING_MESH = "sharding-mesh"
    #: a Pallas kernel's block mask read from a constant (figures: mask, dtype, dims, live, blocks)
    BLOCK_MASK = "block-mask"

    # --- what an engine op's schema rule priced, or why not (analysis/torch attention_ops, quant_ops, scan_ops,
    # gathers: Price.what); shapes are tuples of sizes, window 0 when the op has none ---
    #: attention over dense [B, S, H, D] q/k/v (figures: backward, b, sq, sk, h, dqk, dv, causal, window)
    TORCH_DENSE_ATTENTION = "torch-dense-attention"
    #: attention over packed or paged keys (figures: backward, keys: a Reason saying how the keys are known;
    #: pairs, heads, dqk, dv, kv_heads, causal)
    TORCH_PACKED_ATTENTION = "torch-packed-attention"
    #: the keys and pairs of an attention call from the step's annotation (figures: requests, sq, sk, window)
    TORCH_KEYS_ANNOTATED = "torch-keys-annotated"
    #: packed keys, lengths taken as equal (figures: sequences, keys, window)
    TORCH_KEYS_PACKED = "torch-keys-packed"
    #: keys through the pages a call uses, lengths taken as equal (figures: sequences, keys, pages, page, window)
    TORCH_KEYS_PAGED = "torch-keys-paged"
    #: attention whose number of sequences no argument's shape gives (figures: op, shape, of the queries)
    TORCH_ATTENTION_NO_SEQUENCES = "torch-attention-no-sequences"
    #: attention whose keys' lengths are values in a tensor, with no step annotation (figures: op, shape)
    TORCH_ATTENTION_KEYS_IN_VALUES = "torch-attention-keys-in-values"
    #: a quantized, packed or grouped GEMM (figures: grouped, m, n, k, experts, reached: experts' weights read;
    #: fp4, dtype and weight: the weight's dtype and shape)
    TORCH_QUANT_GEMM = "torch-quant-gemm"
    #: a fused MoE whose top-k or activations are not recorded (figures: op)
    TORCH_MOE_NOT_RECORDED = "torch-moe-not-recorded"
    #: a causal depthwise conv1d (figures: update, tokens, channels, taps, silu, sequences)
    TORCH_CONV1D = "torch-conv1d"
    #: a causal conv1d's backward (figures: tokens, channels, taps)
    TORCH_CONV1D_BACKWARD = "torch-conv1d-backward"
    #: a selective scan (figures: tokens, channels, states, flops: per state element and token; sequences)
    TORCH_SELECTIVE_SCAN = "torch-selective-scan"
    #: a gated DeltaNet core (figures: tokens, key_heads, value_heads, dv, taps, channels, flops: per d_k d_v, a
    #: head and token; annotated, and when so run, sequences, chunked, chunk)
    TORCH_GATED_DELTANET = "torch-gated-deltanet"
    #: a decayed linear-attention decode step (figures: b, h, steps, d, e, flops: per D E)
    TORCH_LIGHTNING_DECODE = "torch-lightning-decode"
    #: a Mamba-2 mixer whose args do not separate its state size (figures: op)
    TORCH_MAMBA2_MIXER_OPAQUE = "torch-mamba2-mixer-opaque"
    #: a gated DeltaNet layer whose args hold the hidden states, not the heads (figures: op)
    TORCH_DELTANET_LAYER_OPAQUE = "torch-deltanet-layer-opaque"
    #: an index_select (figures: shape, of the picked elements)
    TORCH_INDEX_SELECT = "torch-index-select"
    #: an embedding lookup (figures: shape, of the rows picked)
    TORCH_EMBEDDING = "torch-embedding"
    #: a gather (figures: shape, of the index)
    TORCH_GATHER = "torch-gather"
    #: an embedding's dense gradient (figures: out, the gradient written; grad, accumulated into it)
    TORCH_EMBEDDING_BACKWARD = "torch-embedding-backward"
    #: a negative log-likelihood, one logit a row (figures: logits)
    TORCH_NLL_LOSS = "torch-nll-loss"
    #: a negative log-likelihood's gradient (figures: logits)
    TORCH_NLL_LOSS_BACKWARD = "torch-nll-loss-backward"

    # --- why a PyTorch op's recorded arguments cannot be read (TorchOp.problem) ---
    #: an Input Dims entry that cannot be read (figures: op, argument, dims: the entry as shown; why: a Reason,
    #: one of the DIMS_ codes below)
    TORCH_INPUT_DIMS = "torch-input-dims"
    #: sizes that are not integers in [0, 2**63 - 1] (no figures)
    DIMS_NOT_COUNTS = "dims-not-counts"
    #: sizes whose product passes 2**63 - 1 elements (no figures)
    DIMS_TOO_MANY_ELEMENTS = "dims-too-many-elements"
    #: a TensorList given one shape, not a list of shapes (no figures)
    DIMS_LIST_NOT_SHAPES = "dims-list-not-shapes"
    #: sizes and lists of sizes mixed in one entry (no figures)
    DIMS_MIXED = "dims-mixed"
    #: a list of shapes given for a tensor (no figures)
    DIMS_SHAPES_FOR_TENSOR = "dims-shapes-for-tensor"

    # --- a collective in words: an op's (OpReport.collective) and a profile's sharding lines ---
    #: how a collective's device groups sit on the mesh (figures: kind, axes: None for irregular groups;
    #: group_size, num_groups, strides, pairs: a permute's; groups: the first 8 irregular ones, count: of all)
    COLLECTIVE_GROUPS = "collective-groups"
    #: a collective on irregular groups, not timed (figures: those of COLLECTIVE_GROUPS)
    COLLECTIVE_NOT_TIMED = "collective-not-timed"
    #: a PyTorch collective over a group of ranks (figures: kind, bytes, ranks, topology; world: the group is
    #: the trace's world)
    COLLECTIVE_OVER_RANKS = "collective-over-ranks"

    # --- a PyTorch op whose rule raised: the error's text kept as a figure ---
    #: an engine op's rule refused its arguments (figures: op, family, error)
    TORCH_RULE_ERROR = "torch-rule-error"
    #: an aten op's rule refused its arguments (figures: op, args: its shapes and dtypes as labelled, error)
    TORCH_ARGS_ERROR = "torch-args-error"
    #: a collective op whose tensor cannot be read (figures: op, error)
    TORCH_COLLECTIVE_ERROR = "torch-collective-error"
    #: no topology of an NCCL group's size on the chip (figures: ranks, chip, error)
    NCCL_NO_TOPOLOGY = "nccl-no-topology"
