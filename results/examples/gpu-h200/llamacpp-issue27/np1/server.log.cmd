/tmp/h27/cache/llama-server-cuda/11434.0.0-cuda90-96e8806de845/llama-server -m /tmp/h27/cache/models/random-llama3-8b.gguf --host 127.0.0.1 --port 8091 -ngl 99 --metrics -np 1 -c 65536
