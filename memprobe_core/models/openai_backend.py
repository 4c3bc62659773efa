"""Where the ``openai`` backend used to live; it is now the package ``memprobe_core.models.openai``.

Kept so the registry entry ``memprobe_core.models.openai_backend:load_openai`` and older imports
keep working.
"""

from memprobe_core.models.openai import DEFAULT_BASE_URL, OpenAIGenerator, load_openai

__all__ = ["DEFAULT_BASE_URL", "OpenAIGenerator", "load_openai"]
