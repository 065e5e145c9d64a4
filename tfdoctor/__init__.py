"""tfdoctor: profile TensorFlow 2 training, find what bounds it, apply the fixes that measurably help."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from tfdoctor import keras as keras
    from tfdoctor.api import Profile as Profile
    from tfdoctor.api import profile as profile

__all__ = ["Profile", "__version__", "keras", "profile"]


def __getattr__(name: str) -> Any:
    """Lazy exports: ``import tfdoctor`` imports neither TensorFlow nor Keras.

    ``tfdoctor.profile`` / ``tfdoctor.Profile``: the in-script API (:mod:`tfdoctor.api`);
    ``tfdoctor.keras``: the Keras callback module (imports Keras when first touched).
    """
    if name in ("profile", "Profile"):
        from tfdoctor import api

        return getattr(api, name)
    if name == "keras":
        import importlib

        return importlib.import_module("tfdoctor.keras")
    raise AttributeError(f"module 'tfdoctor' has no attribute {name!r}")


def load_ipython_extension(
    ipython: Any,
) -> None:  # pragma: no cover - thin lazy shim, tested via tfdoctor.notebook
    """``%load_ext tfdoctor``: registers the ``%tfdoctor`` / ``%%tfdoctor`` magics."""
    from tfdoctor.notebook import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:  # pragma: no cover
    from tfdoctor.notebook import unload_ipython_extension as _unload

    _unload(ipython)
