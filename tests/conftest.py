"""Test configuration: offline machine facts with the shared mirror beside the repository."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"

# tiktoken's BPE files and the data mirror, when a mirror sits beside the repo (CI and dev machines).
if (SHARED / "tiktoken_cache").is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken_cache"))
if (SHARED / "data").is_dir():
    os.environ.setdefault("CHUNKWISE_DATA_MIRROR", str(SHARED / "data"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The suite's reference vectors and pinned values come from PyTorch, the library's reference
# runtime; backend="auto" (the package default) is tested on its own in test_embeddings_auto_backend.
os.environ.setdefault("CHUNKWISE_EMBED_BACKEND", "torch")
