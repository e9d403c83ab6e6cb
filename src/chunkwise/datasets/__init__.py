"""Benchmark data and a reader's own documents: pinned, hash-checked, from a local mirror or downloaded.

- :mod:`chunkwise.datasets.fetch` -- :func:`data_path` resolves a file listed in the package's
  download manifest (``chunkwise/datasets/manifest.tsv``: relative path, sha256, upstream URL at
  a pinned commit) to a local copy: ``$CHUNKWISE_DATA_MIRROR/<path>`` when a mirror holds it,
  else a download with :func:`pooch.retrieve` into ``$CHUNKWISE_CACHE_DIR/data`` (default
  ``~/.cache/chunkwise/data``). Every copy's sha256 is checked against the manifest.
- :mod:`chunkwise.datasets.chroma` -- the five corpora and 472 questions (790 gold reference
  spans, half-open character offsets) of Smith & Troynikov (2024), "Evaluating Chunking
  Strategies for Retrieval", Chroma technical report.
- :mod:`chunkwise.datasets.local` -- a reader's own folder of documents and a questions file
  (Chroma's CSV or verbatim excerpts), with :func:`validate_questions`.
- :mod:`chunkwise.datasets.loaders` -- document loaders by file type (plain text, Markdown,
  PDF, Word, HTML), one text per file.
- :mod:`chunkwise.datasets.locate` -- candidate passages for hand-written questions (BM25 over
  sentence windows).
- :mod:`chunkwise.datasets.stitch` -- stitched, shuffled and real versions of a span-referenced
  corpus, with the seams recorded (chapter 6).

The CRUD-RAG benchmark's data are read by :mod:`chunkwise.crud.data` (through
:func:`data_path`). Nothing is copied into the repository: the data stay upstream (or in a
mirror), and ``data/README.md`` in the repository describes the manifest, mirrors and licences.
"""

from chunkwise.datasets.chroma import (
    CHROMA_CORPORA,
    CHROMA_QUESTIONS_PATH,
    check_chroma_references,
    chroma_corpus_name,
    chroma_corpus_path,
    load_chroma_corpora,
    load_chroma_questions,
)
from chunkwise.datasets.local import (
    load_documents,
    load_questions,
    read_questions,
    validate_questions,
)
from chunkwise.datasets.fetch import (
    CACHE_ENV,
    MIRROR_ENV,
    ManifestEntry,
    data_path,
    default_cache_dir,
    load_manifest,
    sha256_file,
)

__all__ = [
    "CACHE_ENV",
    "CHROMA_CORPORA",
    "CHROMA_QUESTIONS_PATH",
    "MIRROR_ENV",
    "ManifestEntry",
    "check_chroma_references",
    "chroma_corpus_name",
    "chroma_corpus_path",
    "data_path",
    "default_cache_dir",
    "load_chroma_corpora",
    "load_chroma_questions",
    "load_documents",
    "load_questions",
    "read_questions",
    "validate_questions",
    "load_manifest",
    "sha256_file",
]
