"""tfdoctor: profile TensorFlow 2 training, find what bounds it, apply the fixes that measurably help."""

__version__ = "0.1.0"


def load_ipython_extension(ipython):  # pragma: no cover - thin lazy shim, tested via tfdoctor.notebook
    """``%load_ext tfdoctor``: registers the ``%tfdoctor`` / ``%%tfdoctor`` magics."""
    from tfdoctor.notebook import load_ipython_extension as _load

    _load(ipython)


def unload_ipython_extension(ipython):  # pragma: no cover
    from tfdoctor.notebook import unload_ipython_extension as _unload

    _unload(ipython)
