"""The vLLM serving extension: ``arc-vllm serve`` (launcher), server-side ARC sessions
(sessions, transcript), the ARC chat path with the in-server recall loop (chat), the HTTP
routes (routes) and Prometheus metrics (metrics)."""
