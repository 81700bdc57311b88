"""Plans that run: a plan written as code or flags for JAX, MaxText, vLLM and SGLang."""
