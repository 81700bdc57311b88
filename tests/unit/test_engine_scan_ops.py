"""Linear attention (gated DeltaNet), the Mamba selective scan and the causal conv1d of LLM engines priced by
their registered schemas (analysis/torch/scan_ops.py), and PyTorch's packed fp4 dtype: FLOPs and bytes derived
by hand from each op's arguments, on small synthetic op records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rooftop.analysis.profile import profile_report
from rooftop.analysis.torch.engine_ops import family_category, op_family
from rooftop.analysis.torch.families import SeqStats
from rooftop.analysis.torch.op import TorchOp
from rooftop.analysis.torch.ops import op_cost
from rooftop.analysis.torch.scan_ops import GDN_CONV_TAPS
from rooftop.hardware.catalog import get_chip
from rooftop.model.blocks import LinearAttentionConfig
from rooftop.model.hf import load_hf_config
from rooftop.model.layers import layer_groups
from rooftop.model.transformer import layer_costs
from rooftop.model.workload import Dtypes, Workload
from rooftop.report.reasons import note_text
from tests.unit.test_torch_ops import cpu_op, kernel, launch

BF16, F32, I32, B8 = "c10::BFloat16", "float", "int", "bool"
FP4, FP8 = "c10::Float4_e2m1fn_x2", "c10::Float8_e4m3fn"
NONE: tuple[list[int], str] = ([], "")


def _op(name: str, *args: tuple[list[int], str], concrete: dict[int, str] | None = None) -> TorchOp:
    text = [(concrete or {}).get(i, "") for i in range(len(args))]
    return TorchOp.from_args(name, {"Input Dims": [list(d) for d, _ in args], "Input type": [t for _, t in args],
                                    "Concrete Inputs": text})  # fmt: skip


def _fb(op: TorchOp, stats: SeqStats | None = None) -> tuple[float, float]:
    price = op_cost(op, stats)
    assert price.cost is not None, price.what
    return price.cost.flops, price.cost.hbm_bytes


@pytest.mark.parametrize("ns", ["_C", "sgl_kernel", "trtllm"])
def test_causal_conv1d_fwd_packed_sequences(ns: str) -> None:
    # (x [D=64, T=10], weight [64, 4], bias [64], conv_states [8 slots, 64, 3], query_start_loc [3] (2 sequences),
    #  cache_indices, has_initial_state, silu_activation=True, pad_slot_id)
    op = _op(f"{ns}::causal_conv1d_fwd", ([64, 10], BF16), ([64, 4], BF16), ([64], BF16), ([8, 64, 3], BF16),
             ([3], I32), ([2], I32), ([2], B8), ([], "Scalar"), ([], "Int"), concrete={7: "True"})  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 10 * 64 * (2 * 4 + 4)  # 2 FLOPs a tap, then SiLU
    # x read and written over, weight and bias read, each of the 2 sequences' 3 x 64 window read and written
    assert moved == 2 * 10 * 64 * 2 + 64 * 4 * 2 + 64 * 2 + 2 * 2 * 3 * 64 * 2
    assert op_family(op.name) == "conv1d" and family_category(op.name) == "attention"


def test_causal_conv1d_update_decode_step_without_silu() -> None:
    # sgl_kernel: (x [B=4, D=64], conv_state [16 slots, 64, 3], weight [64, 4], bias None, silu False, ...)
    op = _op("sgl_kernel::causal_conv1d_update", ([4, 64], BF16), ([16, 64, 3], BF16), ([64, 4], BF16), NONE,
             ([], "Scalar"), NONE, ([4], I32), ([], "Int"), concrete={4: "False"})  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 4 * 64 * 2 * 4
    assert moved == 2 * 4 * 64 * 2 + 64 * 4 * 2 + 2 * 4 * 3 * 64 * 2  # only the 4 sequences' rows of the cache


def test_dao_causal_conv1d_fwd_and_backward() -> None:
    # DaoAILab::_causal_conv1d_fwd_cpp(x [2, 64, 10], weight [64, 3], bias, seq_idx, initial_states [2, 64, 2],
    #                                 out, final_states_out, silu)
    x, w, st = ([2, 64, 10], BF16), ([64, 3], BF16), ([2, 64, 2], BF16)
    fwd = _op("DaoAILab::_causal_conv1d_fwd_cpp", x, w, NONE, NONE, st, x, st, ([], "Scalar"), concrete={7: "True"})
    assert _fb(fwd) == (2 * 10 * 64 * (2 * 3 + 4), 2 * 2 * 64 * 10 * 2 + 64 * 3 * 2 + 2 * 2 * 2 * 64 * 2)
    # backward(x, weight, bias, dout, seq_idx, initial_states, dfinal_states, dx, dweight, dbias, dinit, silu)
    bwd = _op("DaoAILab::_causal_conv1d_bwd_cpp", x, w, NONE, x, NONE, NONE, NONE, x, w, NONE, NONE,
              ([], "Scalar"), concrete={11: "True"})  # fmt: skip
    assert _fb(bwd) == (2 * 2 * 10 * 64 * (2 * 3 + 4), 3 * 2 * 64 * 10 * 2 + 2 * 64 * 3 * 2)


def test_selective_scan_fwd_mamba1() -> None:
    # (u [D=32, T=12], delta, A [32, N=16] fp32, B [1, 16, 12], C, D_ [32], z [32, 12], delta_bias [32],
    #  delta_softplus, query_start_loc [4] (3 sequences), cache_indices [3], has_initial_state [3],
    #  ssm_states [10 slots, 32, 16] fp32, pad_slot_id)
    u, bc, vec = ([32, 12], BF16), ([1, 16, 12], BF16), ([32], F32)
    op = _op("_C::selective_scan_fwd", u, u, ([32, 16], F32), bc, bc, vec, u, vec, ([], "Scalar"), ([4], I32),
             ([3], I32), ([3], B8), ([10, 32, 16], F32), ([], "Int"))  # fmt: skip
    flops, moved = _fb(op)
    assert flops == 12 * 32 * 16 * 6  # 6 FLOPs per token and state element (the model's SSMConfig)
    reads = 3 * 32 * 12 * 2 + 32 * 16 * 4 + 2 * 16 * 12 * 2 + 2 * 32 * 4 + 4 * 4 + 3 * 4 + 3 * 1
    assert moved == reads + 2 * 32 * 12 * 2 + 2 * 3 * 32 * 16 * 4  # out and gated out; 3 sequences' states
    assert op_family(op.name) == "scan" and family_category(op.name) == "attention"


def _gdn(tokens: int = 8) -> TorchOp:
    # Qwen3-Next-like heads shrunk: H_k=2, H_v=4, d_k=d_v=16: qkv channels 2 x 2 x 16 + 4 x 16 = 128
    # (mixed_qkv [T, 128], b [T, 4], a [T, 4], core_attn_out [T, 4, 16], layer_name)
    return _op("vllm::gdn_attention_core", ([tokens, 128], BF16), ([tokens, 4], BF16), ([tokens, 4], BF16),
               ([tokens, 4, 16], BF16), ([], "str"))  # fmt: skip


def test_gated_deltanet_prefill_and_decode_from_the_step_annotation() -> None:
    # one prefill request of 6 tokens and two decode requests: 3 sequences, 8 - 3 = 5 tokens computed in chunks
    stats = SeqStats(requests=3, sq=8, sk=100, sqsq=38, sqsk=300)
    flops, moved = _fb(_gdn(), stats)
    recurrent = 8 * 7 * 4 * 16 * 16  # 7 d_k d_v a value head and token
    chunked = 5 * 4 * (2 * 64 * (3 * 16 + 2 * 16) + 2 * 64 * 64 / 3)
    conv = 8 * 128 * (2 * 4 + 4)
    assert flops == pytest.approx(recurrent + chunked + conv)
    state = 2 * 3 * (4 * 16 * 16 * 2 + 3 * 128 * 2)  # each sequence's d_k x d_v states and 3-token conv window
    assert moved == 3 * 8 * 128 * 2 + 8 * 4 * 16 * 2 + 2 * 8 * 4 * 2 + state
    # a decode step (one token a sequence): the recurrence alone
    decode = SeqStats(requests=8, sq=8, sk=800, sqsq=8, sqsk=800)
    assert _fb(_gdn(), decode)[0] == recurrent + conv
    # the same step padded to 16 tokens (a CUDA-graph size): the kernels run the annotation's 8 tokens
    flops, moved = _fb(_gdn(16), decode)
    assert flops == recurrent + conv
    assert moved == 3 * 8 * 128 * 2 + 8 * 4 * 16 * 2 + 2 * 8 * 4 * 2 + 2 * 8 * (4 * 16 * 16 * 2 + 3 * 128 * 2)


def test_gated_deltanet_decode_is_the_models_conv_and_scan() -> None:
    """One rule per physical fact: a Qwen3-Next decode step of 8 sequences (H_k=16, H_v=32, d_k=d_v=128: 8192
    conv channels) priced from the op's shapes equals the model's conv and scan leaves, plus the b and a reads."""
    qn = load_hf_config(Path(__file__).parents[1] / "fixtures" / "hf_configs" / "qwen3-next-80b-a3b.json")
    tree = layer_costs(qn, Workload("decode", 8, 1, kv_len=4096), Dtypes(), layer_groups(qn)[0])
    leaves = {path: leaf.cost for path, leaf in tree.leaves()}
    model = leaves["layer/linear_attention/conv"] + leaves["layer/linear_attention/scan"]
    op = _op("vllm::gdn_attention_core", ([8, 8192], BF16), ([8, 32], BF16), ([8, 32], BF16),
             ([8, 32, 128], BF16), ([], "str"))  # fmt: skip
    flops, moved = _fb(op, SeqStats(requests=8, sq=8, sk=8 * 4096, sqsq=8, sqsk=8 * 4096))
    assert flops == model.flops
    assert moved == model.hbm_bytes + 2 * 8 * 32 * 2


def test_gated_deltanet_without_annotation_is_a_lower_bound_that_says_so() -> None:
    price = op_cost(_gdn())
    assert price.cost is not None and price.cost.flops == 8 * 7 * 4 * 16 * 16 + 8 * 128 * (2 * 4 + 4)
    assert "one assumed" in note_text(price.what) and "d_k assumed = d_v" in note_text(price.what)
    assert GDN_CONV_TAPS == LinearAttentionConfig(1, 1, 1, 1).conv_kernel


def test_gated_deltanet_channels_that_do_not_fit_say_why() -> None:
    op = _op("vllm::gdn_attention_core", ([8, 100], BF16), ([8, 4], BF16), ([8, 4], BF16), ([8, 4, 16], BF16))
    price = op_cost(op)
    assert price.cost is None and "not 2 H_k d_k" in note_text(price.what)


def test_lightning_attention_decode() -> None:
    # (q [B=2, H=4, 1, D=32], k, v [2, 4, 1, E=16], past_kv [2, 4, 32, 16] fp32, slope [4, 1, 1], output!, new_kv!)
    q, v, kv = ([2, 4, 1, 32], BF16), ([2, 4, 1, 16], BF16), ([2, 4, 32, 16], F32)
    op = _op("sgl_kernel::lightning_attention_decode", q, q, v, kv, ([4, 1, 1], F32), v, kv)
    flops, moved = _fb(op)
    assert flops == 2 * 4 * 32 * 16 * 5  # decay, k v^T added, q read out
    assert moved == 2 * (2 * 4 * 32 * 2) + 2 * (2 * 4 * 16 * 2) + 2 * (2 * 4 * 32 * 16 * 4) + 4 * 4
    assert op_family(op.name) == "scan"


def test_mamba2_mixer_op_is_a_scan_that_says_why_it_is_not_priced() -> None:
    op = _op("vllm::mamba_mixer2", ([8, 4 * 64 + 2 * 128 + 4], BF16), ([8, 64], BF16), ([], "str"))
    price = op_cost(op)
    assert price.cost is None and "state size N" in note_text(price.what)
    assert op_family(op.name) == "scan" and family_category(op.name) == "attention"


def test_triton_kernels_attributed_to_the_enclosing_gdn_op(tmp_path: Path) -> None:
    """fla's Triton kernels have no torch op: each launch inside vllm::gdn_attention_core is that op's, and the
    op is priced once with the step annotation's sequences (a decode step: 8 requests, one token each)."""
    dims = [[8, 128], [8, 4], [8, 4], [8, 4, 16], []]
    types = [BF16, BF16, BF16, BF16, "str"]
    step = "execute_8_context_0(sq0sk0sqsq0sqsk0)_generation_8(sq8sk800sqsq8sqsk800)"
    events = [
        {"ph": "X", "cat": "user_annotation", "name": step, "pid": 100, "tid": 1, "ts": 0.0, "dur": 900.0},
        cpu_op("vllm::gdn_attention_core", 10.0, 100.0, dims, types, ext=1),
        launch(20.0, 1), kernel("_causal_conv1d_update_kernel", 200.0, 5.0, 1),
        launch(40.0, 2), kernel("fused_recurrent_gated_delta_rule_fwd_kernel", 210.0, 10.0, 2),
    ]  # fmt: skip
    path = tmp_path / "kineto.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    (op,) = profile_report(path, get_chip("h100")).ops
    assert op.flops == 8 * 7 * 4 * 16 * 16 + 8 * 128 * (2 * 4 + 4)
    assert op.category == "attention"
    assert op.bytes == 3 * 8 * 128 * 2 + 8 * 4 * 16 * 2 + 2 * 8 * 4 * 2 + 2 * 8 * (4 * 16 * 16 * 2 + 3 * 128 * 2)


def test_packed_fp4_dtype_bytes() -> None:
    """c10::Float4_e2m1fn_x2 holds two fp4 values a byte: a [4, 32] operand is 4 x 64 values, 128 bytes."""
    # _C::cutlass_scaled_fp4_mm(out! [4, 8] bf16, a [4, 32] fp4x2, b [8, 32] fp4x2, block scales fp8, alpha)
    op = _op("_C::cutlass_scaled_fp4_mm", ([4, 8], BF16), ([4, 32], FP4), ([8, 32], FP4), ([4, 4], FP8),
             ([8, 4], FP8), ([1], F32))  # fmt: skip
    assert op.nbytes(1) == 4 * 32 * 1 and op.dtype(1) == "fp4"
    assert _fb(op) == (2 * 4 * 8 * 64, 4 * 32 + 8 * 32 + (16 + 32) + 4 * 8 * 2)  # K = 2 x 32; out bf16
    # aten::_scaled_mm(a [4, 32] fp4x2, b [32, 8] fp4x2 (K-packed, a transposed view), scale_a, scale_b, ...)
    mm = _op("aten::_scaled_mm", ([4, 32], FP4), ([32, 8], FP4), ([4, 4], FP8), ([8, 4], FP8), NONE, NONE)
    flops, moved = _fb(mm)
    assert flops == 2 * 4 * 8 * 64
    assert moved == 4 * 32 + 32 * 8 + 4 * 8 * 0.5  # operands as stored; the output in the operands' dtype
