"""``backend="auto"``: on this machine, run a sentence-transformers model on whichever identical-vector
backend is fastest, measured once and remembered (issue #61).

The choice is a speed choice only. A candidate backend (today ONNX Runtime, :mod:`chunkwise.embeddings.onnx`)
is timed against PyTorch on a fixed check set, and it is never chosen when its normalised vectors
differ from PyTorch's by more than :data:`MAX_ABS_DIFF` on that set. Quantised or bfloat16 paths are
not candidates: they move vectors by far more than that.

How it is measured: the model is loaded on PyTorch, the candidate is attached to the same loaded
weights, and :data:`CHECK_TEXTS` texts (chunk-sized, 150 to 1,300 characters, built from a fixed
paragraph; see :func:`check_texts`) are embedded with the embedder's own batch size, one warm-up pass
each, then :data:`ROUNDS` rounds in turns (PyTorch, candidate, PyTorch, ...), so load from other work
hits both alike; each backend's fastest round counts. The candidate wins when its best time is below
PyTorch's best. The record (times, ratio, largest difference, top-5 agreement of eight questions,
the load average during the measurement) is stored as JSON under ``<cache root>/backend-choice/``,
one file per key: model, CPU model, torch threads and the versions of torch, onnxruntime,
sentence-transformers and transformers. A change in any of them measures again; deleting the folder
does too. ``chunkwise embed-backend`` prints the stored records.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = [
    "CHECK_TEXTS",
    "MAX_ABS_DIFF",
    "ROUNDS",
    "check_texts",
    "choice_dir",
    "choose",
    "cpu_model",
    "machine_key",
    "stored_choices",
]

#: A candidate whose normalised vectors differ from PyTorch's by more than this on the check set is
#: never chosen (PyTorch against ONNX Runtime measures 1e-7 to 2e-6 on all-MiniLM-L6-v2).
MAX_ABS_DIFF = 1e-5
#: Texts in the check set.
CHECK_TEXTS = 96
#: Timed rounds per backend (after one warm-up pass each).
ROUNDS = 3

_PARAGRAPH = (
    "The committee met on Tuesday to review the budget for the coming year. Members agreed that the "
    "maintenance of the older buildings should come first, since two roofs leak and the boiler in the "
    "east wing failed twice last winter. A proposal to replace the library's catalogue system was "
    "deferred until the vendor supplies a firm quote. Questions from the public concerned parking near "
    "the school, the opening hours of the swimming pool and the noise from the new bypass. The chair "
    "thanked the volunteers who organised the spring fair, which raised enough to fund the summer "
    "reading scheme. In the second half of the meeting, the treasurer explained why interest income had "
    "fallen and how the reserves would be invested. Several members asked for the accounts to be "
    "published earlier, and the clerk agreed to post them on the website within a month of the year's "
    "end. Finally, the committee approved the plan to plant forty trees along the river path, subject "
    "to the landowner's consent, and set the date of the next meeting for the first week of June."
)
_QUESTIONS = (
    "Which buildings need repairs first?",
    "What happened to the library catalogue proposal?",
    "What did the public ask about?",
    "How much money did the spring fair raise?",
    "Why did interest income fall?",
    "When will the accounts be published?",
    "How many trees will be planted?",
    "When is the next meeting?",
)


def check_texts(n: int = CHECK_TEXTS) -> list[str]:
    """``n`` chunk-sized texts (150 to 1,300 characters, whole words) cut from one fixed paragraph at
    rotating offsets and lengths: deterministic, so every machine measures the same work."""
    words = _PARAGRAPH.split()
    out: list[str] = []
    for i in range(n):
        length = 150 + (i * 397) % 1151  # characters wanted, spread over 150..1,300
        start = (i * 13) % len(words)
        text: list[str] = []
        j = start
        while sum(len(w) + 1 for w in text) < length:
            text.append(words[j % len(words)])
            j += 1
        out.append(" ".join(text))
    return out


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_key(model_id: str, threads: int) -> dict[str, Any]:
    """What a stored choice is valid for: the model, the CPU, the thread count and the libraries."""
    return {
        "model": model_id,
        "cpu": cpu_model(),
        "threads": int(threads),
        "torch": _version("torch"),
        "onnxruntime": _version("onnxruntime"),
        "sentence-transformers": _version("sentence-transformers"),
        "transformers": _version("transformers"),
    }


def choice_dir() -> Path:
    """``<cache root>/backend-choice`` (nothing is created)."""
    from chunkwise._env import cache_root

    return cache_root() / "backend-choice"


def _choice_path(key: dict[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:20]
    return choice_dir() / f"{digest}.json"


def stored_choices() -> list[dict[str, Any]]:
    """Every stored record under :func:`choice_dir`, oldest first (unreadable files are skipped)."""
    folder = choice_dir()
    records = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("backend"), str):
            records.append(record)
    return sorted(records, key=lambda r: str(r.get("measured_at", "")))


def choose(torch_s: float, candidate_s: float | None, max_abs_diff: float | None,
           candidate: str = "onnx") -> tuple[str, str]:
    """The backend to use from one measurement, and why (one sentence).

    Parameters
    ----------
    torch_s : float
        PyTorch's best time on the check set, seconds.
    candidate_s, max_abs_diff : float or None
        The candidate's best time (seconds) and the largest absolute difference of its normalised
        vectors from PyTorch's; ``None`` when the candidate could not run.
    candidate : str
        The candidate's name.

    Returns
    -------
    (backend, reason)
        ``candidate`` only when its vectors are within :data:`MAX_ABS_DIFF` and it was faster;
        otherwise ``"torch"``.
    """
    if candidate_s is None or max_abs_diff is None:
        return "torch", f"{candidate} could not run here, so PyTorch"
    if not (max_abs_diff <= MAX_ABS_DIFF):  # also refuses nan
        return "torch", (f"{candidate}'s vectors differ from PyTorch's by {max_abs_diff:.2g} (> {MAX_ABS_DIFF:g}), "
                         "so it is never chosen")
    ratio = torch_s / candidate_s if candidate_s > 0 else float("inf")
    if ratio > 1.0:
        return candidate, (f"{candidate} ran the check set {ratio:.2f}x as fast as PyTorch "
                           f"with vectors within {max_abs_diff:.1g}")
    return "torch", f"PyTorch was the fastest on this CPU ({candidate} ran at {ratio:.2f}x PyTorch's speed)"


def _top5(docs: np.ndarray, queries: np.ndarray) -> np.ndarray:
    return np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :5]


def measure(st_model: Any, model_id: str, batch_size: int,
            attach: Callable[[Any], None], threads: int) -> dict[str, Any]:
    """Time PyTorch and the ONNX Runtime candidate on the check set; return the record (not stored).

    ``attach(st_model)`` moves the model's transformer to ONNX Runtime (raising when it cannot); the
    model is left on whichever backend :func:`choose` picks.
    """
    texts, questions = check_texts(), list(_QUESTIONS)
    hf = st_model[0].model

    def encode(items: list[str]) -> np.ndarray:
        return np.asarray(st_model.encode(items, batch_size=batch_size, normalize_embeddings=True,
                                          convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t_docs, t_queries = encode(texts), encode(questions)  # PyTorch, also the warm-up
    record: dict[str, Any] = {"key": machine_key(model_id, threads), "check_texts": len(texts),
                              "batch_size": int(batch_size), "rounds": ROUNDS, "candidate": "onnx"}
    try:
        attach(st_model)
    except Exception as exc:  # noqa: BLE001 - any failure means: the candidate cannot run here
        record.update(torch_s=None, onnx_s=None, max_abs_diff=None, top5_identical=None,
                      candidate_error=f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        backend, reason = choose(1.0, None, None)
        _set_forward(hf, None)
        record.update(backend=backend, reason=reason)
        return record
    onnx_forward = hf.__dict__["forward"]
    o_docs, o_queries = encode(texts), encode(questions)  # warm-up of the candidate, and its vectors
    diff = float(max(np.abs(o_docs - t_docs).max(), np.abs(o_queries - t_queries).max()))
    same_top5 = float(np.mean(np.all(_top5(o_docs, o_queries) == _top5(t_docs, t_queries), axis=1)))
    times: dict[str, list[float]] = {"torch": [], "onnx": []}
    for _ in range(ROUNDS):
        for name in ("torch", "onnx"):
            _set_forward(hf, onnx_forward if name == "onnx" else None)
            start = time.perf_counter()
            encode(texts)
            times[name].append(time.perf_counter() - start)
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    torch_s, onnx_s = min(times["torch"]), min(times["onnx"])
    backend, reason = choose(torch_s, onnx_s, diff)
    _set_forward(hf, onnx_forward if backend == "onnx" else None)
    record.update(torch_s=round(torch_s, 4), onnx_s=round(onnx_s, 4),
                  speed_ratio=round(torch_s / onnx_s, 3) if onnx_s > 0 else None,
                  rounds_s={k: [round(v, 4) for v in vs] for k, vs in times.items()},
                  max_abs_diff=diff, top5_identical=same_top5,
                  load_average=[load_before, load_after], backend=backend, reason=reason)
    return record


def _set_forward(hf: Any, forward: Any) -> None:
    """Put the ONNX Runtime ``forward`` on the instance, or remove it (the class's PyTorch forward)."""
    if forward is None:
        hf.__dict__.pop("forward", None)
        hf.__dict__.pop("_chunkwise_onnx", None)
    else:
        hf.forward = forward


def select(st_model: Any, model_id: str, batch_size: int, attach: Callable[[Any], None],
           threads: int) -> dict[str, Any]:
    """The stored choice for this machine and model, or a fresh measurement (then stored).

    With a stored choice of ONNX Runtime, ``attach`` is called (a failure propagates to the caller,
    which falls back to PyTorch); with PyTorch, nothing is done. Returns the record, with
    ``"stored": True`` when it was read rather than measured now.
    """
    key = machine_key(model_id, threads)
    path = _choice_path(key)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("key") != key or record.get("backend") not in ("torch", "onnx"):
            raise ValueError("another key")
    except (OSError, ValueError, AttributeError):
        record = None
    if record is not None:
        if record["backend"] == "onnx":
            attach(st_model)
        return {**record, "stored": True}
    record = measure(st_model, model_id, batch_size, attach, threads)
    record["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".choice-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache root: measured again next time, nothing else lost
    return {**record, "stored": False}
