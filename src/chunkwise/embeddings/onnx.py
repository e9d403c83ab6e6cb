"""ONNX Runtime under a loaded sentence-transformers model: export once, then run the transformer
there (the ``backend="onnx"`` of :class:`chunkwise.embeddings.SentenceTransformerEmbedder`).

Only the transformer's forward pass moves to ONNX Runtime. Tokenisation (with its truncation at
``max_seq_length``), the length-sorted batches, pooling and normalisation stay sentence-transformers'
own, so the two backends differ only in the float arithmetic of the transformer: normalised vectors
agree to about 1e-6 (measured on all-MiniLM-L6-v2: largest difference 1.9e-7 to 2e-6).

The graph is exported from the weights already loaded in PyTorch (``torch.onnx.export`` with the
TorchScript exporter, from a copy set to eager attention, fp32, dynamic batch and sequence axes), run
with graph optimisations on and without busy-waiting threads, checked against PyTorch on two probe
batches, and stored once per set of weights under ``<cache root>/models/onnx/<model>-<digest>/``
(:func:`chunkwise._env.cache_root`), where ``<digest>`` is the sha256 of the model's state dict.
The folder is written in a temporary folder beside it and renamed into place with a marker file, so a
half-written export is never picked up; later runs load ``model.onnx`` without exporting.

Why not sentence-transformers' own ``backend="onnx"``: it needs ``optimum-onnx``, whose every release
pins ``transformers<4.58`` and fails to import with transformers 5 (``get_parameter_dtype`` is gone).
This module needs ``onnxruntime`` to run and ``onnx`` to export (the ``onnx`` extra of chunkwise).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ONNX_MARKER", "OnnxUnavailable", "attach_onnx", "onnx_model_dir", "state_digest"]

#: Name of the file that marks a complete, verified export.
ONNX_MARKER = ".chunkwise-onnx.json"
#: Version of the export recipe (part of the marker: a changed recipe exports again).
_FORMAT = 2
_OPSET = 17
#: Largest absolute difference of the last hidden state (real tokens), ONNX Runtime against PyTorch,
#: on the probe batches at export time; a larger one refuses the export (the vectors would differ).
_PROBE_TOLERANCE = 1e-4
#: The batch traced (padded, so the attention mask is part of the graph), then a batch of another
#: shape: one text alone, a short one, one cut at the model's window.
_PROBE_TEXTS = (
    (
        "Chunking decides which passage a retriever can return.",
        "A longer second probe text, so that the batch is padded: the quick brown fox jumps over the lazy "
        "dog while the retriever ranks the chunks by cosine similarity to the question.",
    ),
    ("Rain fell.", "Tea is served at noon in the garden house. " * 120, "Short."),
)


class OnnxUnavailable(RuntimeError):
    """ONNX Runtime cannot run this model here; the message says why and what to do."""


def _onnxruntime() -> Any:
    """``import onnxruntime`` (one place, so tests can make it fail)."""
    import onnxruntime

    return onnxruntime


def state_digest(module: Any) -> str:
    """sha256 of a torch module's state dict: every tensor's name, dtype, shape and bytes, in name order.

    Identifies the weights whatever folder or hub id they were loaded from (about 0.2 s for
    all-MiniLM-L6-v2's 90 MB, 1 s for all-mpnet-base-v2's 440 MB).
    """
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}\n".encode())
        if t.numel():
            digest.update(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    return digest.hexdigest()


def onnx_model_dir(model_id: str, digest: str) -> Path:
    """``<cache root>/models/onnx/<model id made file-safe>-<first 16 hex of digest>``; nothing is created."""
    from chunkwise._env import cache_root

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id.replace("local:", "").strip("/"))[-80:].strip("._") or "model"
    return cache_root() / "models" / "onnx" / f"{slug}-{digest[:16]}"


def _marker_ok(folder: Path, digest: str) -> bool:
    try:
        marker = json.loads((folder / ONNX_MARKER).read_text(encoding="utf-8"))
        return (
            marker.get("format") == _FORMAT
            and marker.get("weights_sha256") == digest
            and (folder / "model.onnx").stat().st_size == marker.get("size")
        )
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def _input_names(hf_model: Any, tokenizer: Any) -> list[str]:
    import inspect

    params = inspect.signature(hf_model.forward).parameters
    names = [n for n in getattr(tokenizer, "model_input_names", []) if n in params]
    if "input_ids" not in names or "attention_mask" not in names:
        raise OnnxUnavailable(
            f"the model's forward does not take input_ids and attention_mask from its tokenizer ({names})"
        )
    return names


def _probe(tokenizer: Any, names: list[str], texts: tuple[str, ...]) -> dict[str, np.ndarray]:
    enc = tokenizer(list(texts), padding=True, truncation=True, return_tensors="np")
    return {n: np.asarray(enc[n], dtype=np.int64) for n in names}


def _session(path: Path, threads: int) -> Any:
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads)
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # No busy-waiting between operators: on a machine shared with other work, spinning threads cost
    # time slices (measured: 13.2 -> 11.9 texts/s with it on, two threads, loaded machine).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _export(hf_model: Any, tokenizer: Any, names: list[str], dest: Path, digest: str, model_id: str) -> None:
    """Export ``hf_model`` to ``dest/model.onnx``, check it against PyTorch, mark it; atomically."""
    import torch

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args)), return_dict=True).last_hidden_state

    probes = [_probe(tokenizer, names, texts) for texts in _PROBE_TEXTS]
    probe = probes[0]
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        folder = work / "model"
        folder.mkdir()
        path = folder / "model.onnx"
        axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
        with torch.no_grad():
            expected = [hf_model(**{n: torch.from_numpy(v) for n, v in p.items()}).last_hidden_state.numpy()
                        for p in probes]
        # Trace a copy: after torch.onnx's TorchScript trace, the traced module's own PyTorch forward
        # returned wrong numbers here (torch 2.13, transformers 5.24), while the graph was right.
        # The model that keeps running (or that a failed export falls back to) is never traced.
        traced = copy.deepcopy(hf_model).eval()
        # Eager attention: its explicit matmul-softmax-matmul is what ONNX Runtime's optimiser fuses
        # into one Attention node; the SDPA path traced here ran slower than PyTorch itself.
        traced.config._attn_implementation = "eager"
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the tracer's notes on Python-side shape checks
                torch.onnx.export(
                    _LastHidden(traced),
                    tuple(torch.from_numpy(probe[n].copy()) for n in names),
                    str(path),
                    dynamo=False,
                    input_names=names,
                    output_names=["last_hidden_state"],
                    dynamic_axes=axes,
                    opset_version=_OPSET,
                    do_constant_folding=True,
                )
        finally:
            del traced
        session = _session(path, 1)
        diff = 0.0
        for p, want in zip(probes, expected):
            got = session.run(["last_hidden_state"], p)[0]
            mask = p["attention_mask"].astype(bool)
            d = float(np.abs(got - want)[mask].max()) if got.shape == want.shape else float("inf")
            diff = max(diff, d) if d == d else float("nan")
        del session
        if not diff <= _PROBE_TOLERANCE:
            raise OnnxUnavailable(
                f"the exported graph differs from PyTorch by {diff:.3g} on the probe batches "
                f"(allowed {_PROBE_TOLERANCE:g}); not stored"
            )
        (folder / ONNX_MARKER).write_text(
            json.dumps(
                {
                    "format": _FORMAT,
                    "model_id": model_id,
                    "weights_sha256": digest,
                    "size": path.stat().st_size,
                    "inputs": names,
                    "opset": _OPSET,
                    "torch": torch.__version__,
                    "probe_max_abs_diff": diff,
                },
                indent=1,
            ),
            encoding="utf-8",
        )
        if dest.exists() or dest.is_symlink():
            os.replace(dest, work / "stale")  # an unmarked or stale folder: move it aside, then drop it
        try:
            os.replace(folder, dest)
        except OSError:
            if not _marker_ok(dest, digest):  # another process put a complete export there meanwhile
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _stored_diff(session: Any, hf_model: Any, tokenizer: Any, names: list[str]) -> float:
    """Largest |ONNX - PyTorch| over the real tokens of the first probe batch (inf on a shape mismatch)."""
    import torch

    p = _probe(tokenizer, names, _PROBE_TEXTS[0])
    with torch.no_grad():
        want = hf_model(**{n: torch.from_numpy(v) for n, v in p.items()}).last_hidden_state.numpy()
    got = session.run(["last_hidden_state"], {i.name: p[i.name] for i in session.get_inputs()})[0]
    if got.shape != want.shape:
        return float("inf")
    d = float(np.abs(got - want)[p["attention_mask"].astype(bool)].max())
    return d if d == d else float("inf")


def attach_onnx(st_model: Any, model_id: str, threads: int | None = None) -> Path:
    """Run the transformer of a loaded ``SentenceTransformer`` through ONNX Runtime from now on.

    Exports the graph on the first call for these weights (a few seconds for all-MiniLM-L6-v2),
    loads it from the cache root afterwards, and replaces the transformer's ``forward`` on this
    instance only; tokenisation, pooling and normalisation stay sentence-transformers'.

    Parameters
    ----------
    st_model : sentence_transformers.SentenceTransformer
        Loaded on the CPU, first module a text ``Transformer``.
    model_id : str
        The canonical model id (names the folder of the export).
    threads : int, optional
        ONNX Runtime's intra-op threads; default ``torch.get_num_threads()`` (as PyTorch would use).

    Returns
    -------
    pathlib.Path
        The folder holding ``model.onnx``.

    Raises
    ------
    ImportError
        If ``onnxruntime`` is not installed (or ``onnx``, when an export is needed).
    OnnxUnavailable
        If the model is not of a kind handled here (another device, first module not a text
        transformer returning ``last_hidden_state``, hidden states requested), or the exported
        graph disagrees with PyTorch on the probe batch.
    """
    import torch

    _onnxruntime()
    device = str(getattr(st_model, "device", "cpu"))
    if not device.startswith("cpu"):
        raise OnnxUnavailable(f"the model is on {device}; the ONNX backend here runs on the CPU only")
    first = st_model[0]
    hf_model = getattr(first, "model", None)
    tokenizer = getattr(first, "tokenizer", None)
    text = (getattr(first, "modality_config", None) or {}).get("text", {"method": "forward",
                                                                       "method_output_name": "last_hidden_state"})
    if hf_model is None or tokenizer is None or not hasattr(hf_model, "state_dict"):
        raise OnnxUnavailable(f"its first module ({type(first).__name__}) is not a transformer with a tokenizer")
    if text.get("method") != "forward" or text.get("method_output_name") != "last_hidden_state":
        raise OnnxUnavailable(f"its transformer's text output is {text!r}, not forward's last_hidden_state")
    if getattr(getattr(hf_model, "config", None), "output_hidden_states", False):
        raise OnnxUnavailable("the model asks for all hidden states, which the export does not return")
    names = _input_names(hf_model, tokenizer)
    digest = state_digest(hf_model)
    folder = onnx_model_dir(model_id, digest)
    n_threads = threads if threads is not None else torch.get_num_threads()
    if not _marker_ok(folder, digest):
        _export(hf_model, tokenizer, names, folder, digest, model_id)
        session = _session(folder / "model.onnx", n_threads)
    else:
        # A stored export is checked before use: a file damaged on disk (same size, broken bytes)
        # fails to load or disagrees with PyTorch on the probe batch; then it is exported again.
        try:
            session = _session(folder / "model.onnx", n_threads)
            stale = _stored_diff(session, hf_model, tokenizer, names) > _PROBE_TOLERANCE
        except Exception:  # noqa: BLE001 - any load failure of a stored file means: rebuild it
            stale = True
        if stale:
            shutil.rmtree(folder, ignore_errors=True)
            _export(hf_model, tokenizer, names, folder, digest, model_id)
            session = _session(folder / "model.onnx", n_threads)
    wanted = [i.name for i in session.get_inputs()]

    def forward(**features: Any) -> dict[str, Any]:
        ids = features["input_ids"]
        feed = {}
        for n in wanted:
            value = features.get(n)
            feed[n] = (np.zeros(tuple(ids.shape), dtype=np.int64) if value is None
                       else value.detach().cpu().numpy().astype(np.int64, copy=False))
        out = session.run(["last_hidden_state"], feed)[0]
        return {"last_hidden_state": torch.from_numpy(out)}

    hf_model.forward = forward
    hf_model._chunkwise_onnx = folder
    return folder
