"""Where the engine op schemas the torch rules read come from: one label per public registration file, cited
by each rule's table (engine_ops, attention_ops, quant_ops, scan_ops)."""

VLLM = "vLLM csrc/torch_bindings.cpp"
SGL = "SGLang sgl-kernel common_extension.cc"
AITER = "AITER aiter/ops"
