"""Where a model's queries go: the endpoint a stored run records (docs/options.md, "Where a run
is sent"), so that going on with the run sends its texts to the same place.

An endpoint is ``{"backend", "model", "base_url"}`` read from a loaded model's manifest
(``base_url`` is empty for a model with local weights or the fake backend). It never holds the
API key nor the value of the variable that holds it: the manifest of the ``openai`` backend
names its servers with any ``user:password@`` removed, and the key is read from the environment
at each request.
"""

from __future__ import annotations

from typing import Any

from memprobe_core.errors import UsageError

ENDPOINT_KEYS = ("backend", "model", "base_url")


class EndpointMismatch(UsageError):
    """A stored run would be sent to another endpoint than the one it records."""


def endpoint_of(model: Any) -> dict[str, str]:
    """The endpoint of a loaded model (from its ``manifest()``)."""
    return endpoint_from_manifest(model.manifest())


def endpoint_from_manifest(manifest: dict[str, Any] | None) -> dict[str, str]:
    """The endpoint a model manifest names (``{}`` for no manifest)."""
    if not isinstance(manifest, dict):
        return {}
    return {
        "backend": str(manifest.get("backend") or ""),
        "model": str(manifest.get("model_id") or ""),
        "base_url": str(manifest.get("base_url") or ""),
    }


def describe_endpoint(endpoint: dict[str, Any] | None) -> str:
    """``model 'x' at http://host/v1 (openai)``, or ``model 'x' (hf)`` without a server."""
    if not endpoint:
        return "an unrecorded endpoint"
    where = f" at {endpoint['base_url']}" if endpoint.get("base_url") else ""
    return f"model {endpoint.get('model', '')!r}{where} ({endpoint.get('backend') or '?'})"


def same_endpoint(recorded: dict[str, Any], loaded: dict[str, Any]) -> bool:
    """Whether two endpoints are the same place (backend, model and servers)."""
    return all((recorded.get(k) or "") == (loaded.get(k) or "") for k in ENDPOINT_KEYS)


def check_endpoint(
    what: str, recorded: dict[str, Any] | None, loaded: dict[str, Any], remedy: str
) -> None:
    """Refuse to send ``what`` (e.g. "run 12's victim") to ``loaded`` when the run records
    another endpoint (a run that records none is not checked: made before endpoints were).

    Raises:
        EndpointMismatch: naming both endpoints and ``remedy`` (how to switch on purpose).
    """
    if not recorded or same_endpoint(recorded, loaded):
        return
    raise EndpointMismatch(
        f"{what} was sent to {describe_endpoint(recorded)}; this would send it to "
        f"{describe_endpoint(loaded)}: nothing was sent. {remedy}"
    )
