"""Where a sentence-transformers model runs: the backend (PyTorch or ONNX Runtime) and the torch device.

Both are speed choices only: neither is part of an embedder's cache name (the vectors agree to about
1e-6). Each is checked in one place, with the same precedence: an explicit argument, else its
environment variable (:data:`BACKEND_ENV`, :data:`DEVICE_ENV`), else the default (``"auto"``,
``"cpu"``). ``"auto"`` measures once per machine which backend is faster
(:mod:`chunkwise.embeddings.autobackend`); ``"onnx"`` exports the transformer once
(:mod:`chunkwise.embeddings.onnx`).
"""

from __future__ import annotations

import os
import re

__all__ = [
    "BACKEND_ENV",
    "DEVICE_ENV",
    "EMBED_BACKENDS",
    "ONNX_PIN_HINT",
    "check_device_available",
    "resolve_backend",
    "resolve_device",
]

#: What runs a sentence-transformers model's transformer: "auto" (the default: the faster of the two
#: on this CPU, measured once, :mod:`chunkwise.embeddings.autobackend`), PyTorch or ONNX Runtime.
EMBED_BACKENDS = ("auto", "torch", "onnx")
#: Environment variable that picks the backend when no ``backend`` argument is given.
BACKEND_ENV = "CHUNKWISE_EMBED_BACKEND"
#: Environment variable that picks the torch device when no ``device`` argument is given.
DEVICE_ENV = "CHUNKWISE_EMBED_DEVICE"
#: What the ``onnx`` extra of pyproject.toml installs (the same pins).
ONNX_PIN_HINT = "onnxruntime==1.32.0 onnx==1.23.2"


def resolve_backend(backend: str | None = None) -> str:
    """The backend a sentence-transformers embedder runs on: the one place that checks the choice.

    Precedence: an explicit ``backend`` argument, else ``$CHUNKWISE_EMBED_BACKEND`` when set and not
    blank (case and surrounding spaces ignored), else ``"auto"``.

    Parameters
    ----------
    backend : {"auto", "torch", "onnx"} or None, default None
        ``"auto"``: whichever of the two below ran a fixed check set faster on this CPU, measured on
        the first load of each model and stored per CPU model, thread count and library versions
        (:mod:`chunkwise.embeddings.autobackend`); ONNX Runtime is never chosen when its vectors differ from
        PyTorch's by more than 1e-5 there. ``"torch"``: PyTorch, as sentence-transformers runs by
        default. ``"onnx"``: the transformer through ONNX Runtime, exported once per model from the
        same weights (:func:`chunkwise.embeddings.onnx.attach_onnx`); the vectors agree with PyTorch's to about
        1e-6. All three are speed choices only: the cache key is the same. ``None``: the environment
        variable, else ``"auto"``.

    Returns
    -------
    str
        ``"auto"``, ``"torch"`` or ``"onnx"``.

    Raises
    ------
    ValueError
        If ``backend`` (or the environment variable) is another value; the message names the value,
        where it came from and the allowed values.
    """
    if backend is None:
        value = os.environ.get(BACKEND_ENV, "")
        if not value.strip():
            return "auto"
        choice, source = value.strip().lower(), f"${BACKEND_ENV}"
    else:
        choice, source = backend, "backend"
    if not isinstance(choice, str) or choice not in EMBED_BACKENDS:
        allowed = ", ".join(repr(b) for b in EMBED_BACKENDS)
        shown = value if backend is None else backend
        raise ValueError(f"{source} must be one of {allowed} (or unset: 'auto'), got {shown!r}.")
    return choice


def resolve_device(device: str | None = None) -> str:
    """The torch device a sentence-transformers model runs on: the one place that checks the choice.

    Precedence: an explicit ``device`` argument, else ``$CHUNKWISE_EMBED_DEVICE`` when set and not
    blank (surrounding spaces ignored), else ``"cpu"``. Only the spelling is checked here; whether
    the device exists is checked when the model is loaded (:func:`check_device_available`), so a
    configuration can be built on a machine without it.

    Parameters
    ----------
    device : str or None, default None
        ``"cpu"``, ``"cuda"``, ``"cuda:<index>"`` or ``"mps"``. ``None``: the environment variable,
        else ``"cpu"``. The device is not part of an embedder's cache name: a GPU's float32
        vectors agree with the CPU's to about 1e-6, as the ONNX backend's do (README, "Offline use
        and configuration").

    Returns
    -------
    str
        The device, e.g. ``"cpu"`` or ``"cuda:0"``.

    Raises
    ------
    ValueError
        If the value (argument or environment variable) is not one of those spellings; the
        message names the value and where it came from.
    """
    if device is None:
        value = os.environ.get(DEVICE_ENV, "")
        if not value.strip():
            return "cpu"
        choice, source = value.strip(), f"${DEVICE_ENV}"
    else:
        choice, source = device, "device"
    if not isinstance(choice, str) or not re.fullmatch(r"cpu|mps|cuda(:\d+)?", choice):
        raise ValueError(
            f"{source} must be 'cpu', 'cuda', 'cuda:<index>' or 'mps' (or unset: 'cpu'), got {choice!r}."
        )
    return choice


def check_device_available(device: str) -> None:
    """Raise a clear error if torch cannot use ``device`` on this machine (called before loading).

    Parameters
    ----------
    device : str
        A value returned by :func:`resolve_device`.

    Raises
    ------
    RuntimeError
        For ``"cuda..."`` when ``torch.cuda.is_available()`` is false (a CPU build of torch, or no
        driver), for an index past ``torch.cuda.device_count()``, or for ``"mps"`` when
        ``torch.backends.mps.is_available()`` is false. The message says how to run on the CPU.
    """
    if device == "cpu":
        return
    import torch

    fix = f"pass device='cpu' (or unset ${DEVICE_ENV}) to run on the CPU"
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device {device!r} was asked for, but torch {torch.__version__} sees no CUDA device "
                "(a CPU build of torch, or no NVIDIA driver on this machine): "
                f"install a CUDA build of torch on a machine with a GPU, or {fix}."
            )
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device {device!r} was asked for, but torch sees {torch.cuda.device_count()} CUDA "
                f"device(s) (indices from 0): choose one of them, or {fix}."
            )
    elif device == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"device 'mps' was asked for, but torch {torch.__version__} has no MPS backend here: {fix}.")
