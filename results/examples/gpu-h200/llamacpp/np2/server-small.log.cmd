/tmp/cache/llama-server-cuda/11434.0.0-cuda90-96e8806de845/llama-server -m /tmp/gpu/SmolLM2.gguf --alias smollm2-135m --host 127.0.0.1 --port 8091 -ngl 99 --metrics -np 2 -b 512 -ub 512 -c 16384
