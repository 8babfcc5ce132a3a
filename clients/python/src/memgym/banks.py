"""Drop-in replacements for the seeds' ``ExperienceManager`` (the Training-Free GRPO design) and ``SemanticMemoryManager`` (the semantic-memory design).

Why this exists: Training-Free GRPO code written against the design documents keeps its experience
library in a Python dict and a JSON file, one process at a time. These classes keep the same methods,
arguments and return values but hold the library in a memgym bank, so a trainer switches with one import::

    from memgym.banks import ExperienceManager, SemanticMemoryManager

and gets what the dict could not give: every write durable before it returns, ids that are never reused
(the counter lives in the bank), several trainers on one library, retrieval on the server's embedder and
index, and usage statistics. The bank is the persistence; ``save`` / ``load`` still read and write the
seeds' files, atomically.

Where the seeds' behaviour is not reproduced exactly, and why (also in clients/python/README.md):

- **The library lives in the bank, not in the object.** Two managers on the same bank see each other's
  writes; ``experiences`` and ``_next_id`` are read-only properties that ask the server (assigning to them,
  as seed code never documents, raises ``AttributeError``).
- **The checkpoint is read once, into an empty bank.** ``ExperienceManager(checkpoint_path)`` imports the
  file only when the bank holds nothing; a bank that already has experiences is newer than any file (each
  write is durable), so the file is not read again. Nothing is written to ``checkpoint_path`` unless
  ``save`` is called, as in the seeds.
- **``load`` keeps the id counter monotonic.** After ``load`` the counter is the largest of the bank's,
  the file's ``next_id`` and the file's largest id + 1, so an id the bank once issued is never issued
  again (the seed sets ``_next_id`` to the file's value, which can reissue ids).
- **Confidence is clipped to [0, 1]** by ``add_experience`` (the semantic-memory design stores ``max − min`` of the
  advantages as it is, which can exceed 1; the server's own ``group_advantages`` rule clips the same way).
- **Texts are checked** by the server's one text rule (the book's "Errors and limits"). An empty text, one over
  4,000 characters, or one holding a control character other than ``\\n``/``\\t``, a bidi override or
  isolate, U+2028/U+2029 or a lone surrogate is refused (``MemgymError`` INVALID_ARGUMENT /
  RESOURCE_EXHAUSTED, naming the field) where the seed would store it; in ``apply_operations`` such an
  operation is skipped, as every unusable operation is. Texts are stored NFC and trimmed, and
  ``format_for_prompt`` writes a line break inside a text as ``\\n``, so one experience is one line.
- **Files and operations are strict JSON**: a key repeated inside one object is refused, naming it. A
  checkpoint the server refuses leaves no bank behind (the file is imported with ``ImportBank``, which
  creates the bank only when it accepts the file).
- **Merges keep usage**: the merged experience's ``usage_count`` is the sum of its sources' (the semantic-memory design).
- **``max_size`` is at least 1** (``ValueError``): the server refuses to compress a bank to nothing.
- **Ids are the seed's exact keys.** ``delete`` / ``modify`` return False for anything that is not a live
  ``"G{N}"`` (the server itself would also accept ``"g5"`` or ``"5"``; the seed's dict would not).
- **``merge`` with an unknown or a single id raises** ``MemgymError`` (NOT_FOUND / INVALID_ARGUMENT) and
  changes nothing; the seed documents no failure (upstream deletes the ids it knows and still adds).
- **Embeddings** come from the server's embedder (``--embedder``), not sentence-transformers in the
  trainer; similarities therefore differ from the seed's numbers, and no NPZ file is written.
- **Compression and near-duplicate merging** run on the server with its documented parameters (decay 0.1,
  k-means seed 0; the book's "Banks: compression"); ``merge_similar(use_llm=True)`` needs the server's LLM
  (``--llm-base-url``), else it raises FAILED_PRECONDITION rather than silently merging without it.
- **``format_for_prompt()`` without a query lists every experience** in id order (``top_k`` applies only
  with a query, as retrieval); with ``domain_filter`` and no query, every experience of that domain.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import grpc

from memgym._banks_client import Operations
from memgym.client import DEFAULT_ADDRESS, MemgymClient, message_to_dict
from memgym.errors import MemgymError
from memgym.v1 import banks_pb2 as bpb

log = logging.getLogger(__name__)

#: Environment variable naming the server when neither ``address`` nor ``client`` is given.
ADDRESS_ENV = "MEMGYM_ADDRESS"
#: The bank used when neither ``bank`` nor ``checkpoint_path`` names one.
DEFAULT_BANK = "experiences"
#: Operations per ApplyOperations call (the server's cap); longer lists are sent in batches of this size.
MAX_OPERATIONS_PER_CALL = 1000

PathLike = Union[str, "os.PathLike[str]"]

_SEED_ID = re.compile(r"G(0|[1-9][0-9]*)")
_NOT_BANK_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def bank_name_for(checkpoint_path: Optional[PathLike]) -> str:
    """The bank a checkpoint path stands for: the file name without its extension, each character a bank
    name cannot hold replaced by ``_``, no leading ``.``, at most 64 characters; ``"experiences"`` when
    there is no path (or nothing is left)."""
    if not checkpoint_path:
        return DEFAULT_BANK
    stem = os.path.splitext(os.path.basename(os.fspath(checkpoint_path)))[0]
    name = _NOT_BANK_CHARS.sub("_", stem).lstrip(".")[:64]
    return name or DEFAULT_BANK


def file_format(data: str) -> int:
    """The ``BankFormat`` of a library file's text: memgym's own (``"format": "memgym-bank"``), the Training-Free GRPO design's
    (``{"experiences": {...}, "next_id": N}``) or upstream's per-step ``{"G0": text}``. Text that is not a
    JSON object is called the Training-Free GRPO design's, so the server's error names what is wrong with it."""
    try:
        root = json.loads(data)
    except ValueError:
        return bpb.BANK_FORMAT_SEED_JSON
    if isinstance(root, dict):
        if root.get("format") == "memgym-bank":
            return bpb.BANK_FORMAT_MEMGYM_JSON
        if "experiences" not in root:
            return bpb.BANK_FORMAT_UPSTREAM_JSON
    return bpb.BANK_FORMAT_SEED_JSON


def write_atomically(path: PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` so that a crash leaves the old file or the new one, never half of one:
    a temporary file in the same directory, flushed and fsynced, renamed over ``path``, and the directory
    fsynced so the rename is durable too. Missing parent directories are created."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # not every platform can open a directory
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _is(err: MemgymError, *codes: grpc.StatusCode) -> bool:
    return err.code in codes


def _unknown_id(err: MemgymError, exp_id: str) -> bool:
    """Whether ``err`` is NOT_FOUND for the experience ``exp_id`` (not for the bank, which is a failure)."""
    return _is(err, grpc.StatusCode.NOT_FOUND) and f"experience {exp_id} not found" in err.details


class ExperienceManager:
    """The Training-Free GRPO design's ``ExperienceManager`` on a memgym bank: the experience library E of Training-Free GRPO.

    ``bank`` defaults to the stem of ``checkpoint_path`` (``"./experiences.json"`` → ``"experiences"``),
    else ``"experiences"``; the bank is created if missing, and the checkpoint file, if it exists, is
    imported into it while the bank is empty. ``address`` defaults to ``$MEMGYM_ADDRESS``, else
    ``127.0.0.1:50051``; pass ``client`` to share a ``MemgymClient`` (it is then not closed by ``close``).
    Server failures raise ``memgym.MemgymError``.
    """

    def __init__(
        self,
        checkpoint_path: Optional[str] = None,
        *,
        bank: Optional[str] = None,
        address: Optional[str] = None,
        client: Optional[MemgymClient] = None,
    ):
        if client is not None and address is not None:
            raise ValueError("pass either address or client, not both")
        self.checkpoint_path = checkpoint_path
        self.bank = bank or bank_name_for(checkpoint_path)
        self._owns_client = client is None
        self.client = client if client is not None else MemgymClient(address or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS)
        #: What the last ``apply_operations`` call did not apply (status NOT_FOUND or INVALID, with the reason).
        self.skipped_operations: List[bpb.OperationResult] = []
        try:
            if checkpoint_path and os.path.isfile(checkpoint_path) and self._size() in (None, 0):
                # ImportBank creates a missing bank; a file it refuses leaves no bank behind.
                self._import_file(checkpoint_path, replace=False)
            self._open_bank()
        except BaseException:
            self.close()
            raise

    def _size(self) -> Optional[int]:
        """The bank's number of experiences, ``None`` when it does not exist."""
        try:
            return self.client.get_bank(self.bank).size
        except MemgymError as err:
            if _is(err, grpc.StatusCode.NOT_FOUND):
                return None
            raise

    def _open_bank(self) -> bpb.Bank:
        return self.client.create_bank(self.bank, if_not_exists=True)

    def _import_file(self, path: PathLike, *, replace: bool) -> None:
        with open(path, encoding="utf-8") as f:
            data = f.read()
        try:
            self.client.import_bank(self.bank, file_format(data), data, replace=replace)
        except MemgymError as err:
            # Another process filled the bank between our look and the import: its library wins.
            if replace or not _is(err, grpc.StatusCode.FAILED_PRECONDITION):
                raise

    # -- the Training-Free GRPO design's API -------------------------------------------------------------------------
    def add(self, experience: str) -> str:
        """Adds an experience; returns its id ``"G{N}"`` (the first is ``"G0"``; ids are never reused)."""
        return self.client.add_experience(self.bank, experience).id

    def delete(self, exp_id: str) -> bool:
        """Deletes an experience: True if it was there, False if the id is unknown."""
        if not isinstance(exp_id, str) or not _SEED_ID.fullmatch(exp_id):
            return False
        try:
            self.client.delete_experience(self.bank, exp_id)
        except MemgymError as err:
            if _unknown_id(err, exp_id):
                return False
            raise
        return True

    def modify(self, exp_id: str, new_experience: str) -> bool:
        """Replaces an experience's text: True if it was there, False if the id is unknown."""
        if not isinstance(exp_id, str) or not _SEED_ID.fullmatch(exp_id):
            return False
        try:
            self.client.modify_experience(self.bank, exp_id, new_experience)
        except MemgymError as err:
            if _unknown_id(err, exp_id):
                return False
            raise
        return True

    def merge(self, exp_ids: List[str], merged_experience: str) -> str:
        """Replaces the experiences ``exp_ids`` (two or more) by ``merged_experience``; returns the new id."""
        return self.client.merge_experiences(self.bank, list(exp_ids), merged_experience).id

    def apply_operations(self, operations: Operations) -> None:
        """Applies an LLM's operations (the Training-Free GRPO design's ``option`` vocabulary or upstream's ``operation``), in order.

        Like the seed, what can be applied is and the rest is skipped: an operation naming an unknown id,
        a malformed one, or a reply with no operations in it never raises (the skipped ones are in
        ``skipped_operations``). A list, a dict holding ``"operations"``, or the LLM's raw text is accepted.
        """
        self.skipped_operations = []
        if operations is None:  # an extractor that found nothing
            return
        if isinstance(operations, (str, Mapping)):
            batches: List[Any] = [operations]
        else:
            ops = list(operations)
            batches = [ops[i : i + MAX_OPERATIONS_PER_CALL] for i in range(0, len(ops), MAX_OPERATIONS_PER_CALL)]
        for batch in batches:
            if isinstance(batch, str):
                text = batch
            else:
                body = dict(batch) if isinstance(batch, Mapping) else [dict(op) if isinstance(op, Mapping) else op for op in batch]
                text = json.dumps(body, ensure_ascii=False, default=str)  # a stray object becomes an invalid op
            try:
                resp = self.client.apply_operations(self.bank, text, partial=True)
            except MemgymError as err:
                if _is(err, grpc.StatusCode.INVALID_ARGUMENT):  # no operations could be read at all
                    log.info("apply_operations: nothing applied to bank %s: %s", self.bank, err.details)
                    continue
                raise
            for result in resp.results:
                if result.status in (bpb.OPERATION_STATUS_NOT_FOUND, bpb.OPERATION_STATUS_INVALID):
                    log.info("apply_operations: skipped on bank %s: %s", self.bank, result.message)
                    self.skipped_operations.append(result)

    def format_for_prompt(self) -> str:
        """Every experience as ``[G0]. text`` lines in id order, joined by newlines ("" when empty)."""
        return self.client.format_for_prompt(self.bank).text

    def save(self, path: str) -> None:
        """Writes the library as the Training-Free GRPO design's file ``{"experiences": {...}, "next_id": N}``, atomically."""
        data = self.client.export_bank(self.bank, bpb.BANK_FORMAT_SEED_JSON).data
        write_atomically(path, json.dumps(json.loads(data), indent=2, ensure_ascii=False) + "\n")

    def load(self, path: str) -> None:
        """Replaces the library with the file's (the Training-Free GRPO design's, upstream's or memgym's format), ids as in the file."""
        self._import_file(path, replace=True)

    def __len__(self) -> int:
        return self.client.get_bank(self.bank).size

    @property
    def experiences(self) -> Dict[str, str]:
        """The library, id → text, in id order (read from the bank on each access)."""
        return {e.id: e.text for e in self.client.iter_experiences(self.bank, page_size=1000)}

    @property
    def _next_id(self) -> int:
        """The number of the next id (``"G{_next_id}"``), as kept by the bank."""
        return self.client.get_bank(self.bank).next_id

    # -- housekeeping ---------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the client's channel if this manager opened it."""
        if self._owns_client and getattr(self, "client", None) is not None:
            self.client.close()

    def __enter__(self) -> "ExperienceManager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(bank={self.bank!r}, address={self.client.address!r})"


class SemanticMemoryManager(ExperienceManager):
    """The semantic-memory design's ``SemanticMemoryManager`` on a memgym bank: experiences with confidence, domain, epoch and
    usage, retrieved by cosine similarity on the server's embedder, compressed to ``max_size``.

    It extends ``ExperienceManager`` (the semantic-memory design), so ``add``, ``delete``, ``modify``, ``merge``,
    ``apply_operations`` and ``experiences`` work as there. A new bank gets ``max_size`` as its Compress
    default; ``compress_memory()`` always uses this object's ``max_size``. ``decay`` and ``kmeans_seed``
    tune the temporal/hybrid and diversity strategies (server defaults 0.1 and 0). ``save``/``load`` use
    memgym's JSON (every field and counter, no vectors: they are embedded again on load); ``load`` also
    reads the Training-Free GRPO design's and upstream's files, as the semantic-memory design loads old checkpoints.
    """

    def __init__(
        self,
        checkpoint_path: Optional[str] = None,
        max_size: int = 100,
        *,
        bank: Optional[str] = None,
        address: Optional[str] = None,
        client: Optional[MemgymClient] = None,
        decay: Optional[float] = None,
        kmeans_seed: Optional[int] = None,
    ):
        if max_size < 1:
            raise ValueError(f"max_size must be >= 1 (a bank keeps at least one experience), got {max_size}")
        self.max_size = int(max_size)
        self.decay = decay
        self.kmeans_seed = kmeans_seed
        super().__init__(checkpoint_path, bank=bank, address=address, client=client)

    def _open_bank(self) -> bpb.Bank:
        return self.client.create_bank(self.bank, max_size=self.max_size, if_not_exists=True)

    def add_experience(
        self, text: str, confidence: float = 0.5, domain: str = "general", epoch: Optional[int] = None
    ) -> str:
        """Adds an experience; ``epoch`` defaults to the current one (``set_epoch``). Returns its id.

        ``confidence`` is clipped to [0, 1]: the semantic-memory design's ``advantages.max() - advantages.min()`` can exceed 1
        for normalised advantages, and the server keeps confidences in [0, 1] (NaN raises ValueError).
        """
        c = float(confidence)
        if math.isnan(c):
            raise ValueError("confidence must be a number, got NaN")
        return self.client.add_experience(self.bank, text, confidence=min(1.0, max(0.0, c)), domain=domain, epoch=epoch).id

    def retrieve_relevant(
        self, query: str, top_k: int = 5, min_similarity: float = 0.0, domain_filter: Optional[str] = None
    ) -> List[Tuple[str, float, str]]:
        """The ``top_k`` experiences most similar to ``query`` (cosine >= ``min_similarity``), best first, as
        ``(id, similarity, text)``; each one's usage is counted."""
        if top_k <= 0:
            return []
        resp = self.client.retrieve(
            self.bank, query, top_k=top_k, min_similarity=float(min_similarity), domain=domain_filter or ""
        )
        return [(h.id, float(h.similarity), h.text) for h in resp.hits]

    def compress_memory(self, max_size: Optional[int] = None, strategy: str = "hybrid") -> int:
        """Removes experiences until ``max_size`` (default ``self.max_size``) remain; returns how many went.

        ``strategy``: "diversity", "importance", "temporal" or "hybrid" (the book's "Banks: compression").
        """
        resp = self.client.compress(
            self.bank,
            max_size=self.max_size if max_size is None else max_size,
            strategy=strategy,
            decay=self.decay,
            seed=self.kmeans_seed,
        )
        return len(resp.removed_ids)

    def merge_similar(self, threshold: float = 0.9, use_llm: bool = False) -> int:
        """Merges groups of near-duplicates (cosine >= ``threshold``); returns the experiences merged away."""
        return self.client.merge_similar(self.bank, threshold=float(threshold), use_llm=use_llm).merged

    def get_memory_stats(self) -> Dict[str, Any]:
        """``total_experiences``, ``avg_confidence``, ``domains`` (domain → count), ``total_usage``,
        ``used_experiences``, ``epoch``, ``version`` and ``max_size`` (this manager's)."""
        stats = message_to_dict(self.client.get_stats(self.bank))
        stats["max_size"] = self.max_size
        return stats

    def format_for_prompt(  # type: ignore[override]  # the semantic-memory design widens the base signature
        self, query: Optional[str] = None, top_k: int = 10, domain_filter: Optional[str] = None
    ) -> str:
        """``[G0]. text`` lines: with a ``query`` the ``top_k`` most relevant, best first (counting usage);
        without one every experience in id order (of ``domain_filter`` when given)."""
        if query is None or not query.strip():
            if not domain_filter:
                return super().format_for_prompt()
            return "\n".join(f"[{e.id}]. {e.text}" for e in self.client.iter_experiences(self.bank, domain=domain_filter))
        if top_k <= 0:
            return ""
        return self.client.format_for_prompt(self.bank, query, top_k=top_k, domain=domain_filter or "").text

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch new experiences and usage are stamped with."""
        self.client.set_epoch(self.bank, epoch)

    @property
    def current_epoch(self) -> int:
        """The bank's current epoch."""
        return self.client.get_bank(self.bank).epoch

    def save(self, path: str) -> None:
        """Writes memgym's JSON (every field and counter of every experience), atomically."""
        data = self.client.export_bank(self.bank, bpb.BANK_FORMAT_MEMGYM_JSON).data
        write_atomically(path, json.dumps(json.loads(data), indent=2, ensure_ascii=False) + "\n")


__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_BANK",
    "ExperienceManager",
    "SemanticMemoryManager",
    "bank_name_for",
    "file_format",
    "write_atomically",
]
