#!/usr/bin/env bash
# Rerun calculon and llm-analysis on Megatron-LM 2021 Table 1 and rewrite peers.csv.
#   benchmarks/results/peers-megatron-table1/rerun.sh [WORKDIR [OUT.csv]]
# WORKDIR gets the two checkouts (cloned unless already there) and a private site folder;
# nothing is installed into the project's environment.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
out=${2:-$here/peers.csv}
CALCULON_URL=https://github.com/calculon-ai/calculon
CALCULON_COMMIT=caa4b11f8fe1fee3ba57adaacb7590d7deabd053
LLM_ANALYSIS_URL=https://github.com/cli99/llm-analysis
LLM_ANALYSIS_COMMIT=d841e40aec8c84b9e76ba9cfbce67418adb172bd
mkdir -p "$work"
[ -d "$work/calculon" ] || git clone -q "$CALCULON_URL" "$work/calculon"
git -C "$work/calculon" checkout -q "$CALCULON_COMMIT"
[ -d "$work/llm-analysis" ] || git clone -q "$LLM_ANALYSIS_URL" "$work/llm-analysis"
git -C "$work/llm-analysis" checkout -q "$LLM_ANALYSIS_COMMIT"
# calculon imports numpy and psutil; llm-analysis needs fire. Its PyPI release (0.2.2) is older
# than this commit and lacks replicated data parallelism, so it is installed from the checkout.
python -m pip install -q --no-warn-script-location --target "$work/site" numpy psutil "fire>=0.5,<0.6"
python -m pip install -q --no-deps --target "$work/site" "$work/llm-analysis"
PYTHONPATH="$work/site:$work/calculon" python "$here/run_peers.py" "$work/calculon" "$out"
