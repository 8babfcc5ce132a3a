"""The ``Banks`` RPCs (``memgym.v1.Banks``, ``proto/memgym/v1/banks.proto``) as client methods.

Why this exists: ``MemgymClient`` and ``AsyncMemgymClient`` serve the episode services; a trainer that
keeps a Training-Free GRPO experience library across episodes and epochs needs the bank calls on the
same channel, with the same deadline, retry policy and error mapping. They live here, as two mixins
(blocking and asyncio) over one set of request builders, so ``client.py`` stays readable and the two
clients cannot drift apart.

Each method is named after its RPC in snake_case, takes the request's fields as keyword arguments
(``None`` leaves an ``optional`` field unset, so the server's default applies) and returns the response
message (``memgym.v1.banks_pb2``). Retries on ``UNAVAILABLE`` follow the episode calls' rule, only where
a second attempt cannot change anything twice:

- reads are retried: ``GetBank``, ``ListBanks``, ``GetExperience``, ``ListExperiences``, ``GetStats``,
  ``ExportBank``, and ``Retrieve`` / ``FormatForPrompt`` when they count no usage (``read_only``, or a
  ``FormatForPrompt`` without a query, which lists the library and counts nothing);
- ``CreateBank`` is retried only with ``if_not_exists`` (a repeat then returns the same bank);
- every other write is sent once: a retried add could add twice, and every write moves ``version``.
"""

from __future__ import annotations

import json
from typing import Any, AsyncIterator, Iterator, Mapping, NamedTuple, Optional, Sequence, Union

from memgym._requests import msg, pick
from memgym.v1 import banks_pb2 as bpb

#: Bank kinds accepted by ``create_bank(kind=...)``.
BANK_KINDS = {"experience": bpb.BANK_KIND_EXPERIENCE}
#: Library file formats accepted by ``import_bank`` / ``export_bank`` (names as in banks.proto, lower case).
BANK_FORMATS = {
    "seed": bpb.BANK_FORMAT_SEED_JSON,
    "seed-json": bpb.BANK_FORMAT_SEED_JSON,
    "upstream": bpb.BANK_FORMAT_UPSTREAM_JSON,
    "upstream-json": bpb.BANK_FORMAT_UPSTREAM_JSON,
    "memgym": bpb.BANK_FORMAT_MEMGYM_JSON,
    "memgym-json": bpb.BANK_FORMAT_MEMGYM_JSON,
}

#: Operations for ``apply_operations``: a list of operation dicts, an object holding one, or JSON text
#: (an LLM's reply is passed on as it is; the server finds the operations in it).
Operations = Union[str, Sequence[Mapping[str, Any]], Mapping[str, Any]]


def operations_json(operations: Operations) -> str:
    """The operations as the JSON text ``ApplyOperationsRequest.operations_json`` carries."""
    if isinstance(operations, str):
        return operations
    if isinstance(operations, Mapping):
        return json.dumps(dict(operations), ensure_ascii=False)
    return json.dumps([dict(op) if isinstance(op, Mapping) else op for op in operations], ensure_ascii=False)


class _Plan(NamedTuple):
    """One call: the RPC's name in the ``Banks`` service, its request, and whether a retry is safe."""

    rpc: str
    request: Any
    idempotent: bool


def _create_bank(name: str, kind: Union[None, int, str], max_size: Optional[int], if_not_exists: bool) -> _Plan:
    req = msg(bpb.CreateBankRequest, name=name, kind=pick(kind, BANK_KINDS, ("bank-format-", "bank-kind-"), "bank kind"), max_size=max_size)
    req.if_not_exists = bool(if_not_exists)
    return _Plan("CreateBank", req, bool(if_not_exists))


def _add(
    bank: str,
    text: str,
    confidence: Optional[float],
    domain: Optional[str],
    epoch: Optional[int],
    expected_version: Optional[int],
    group_advantages: Optional[Sequence[float]],
) -> _Plan:
    req = msg(
        bpb.AddExperienceRequest,
        bank=bank,
        text=text,
        confidence=confidence,
        domain=domain,
        epoch=epoch,
        expected_version=expected_version,
        group_advantages=[float(a) for a in group_advantages] if group_advantages is not None else None,
    )
    return _Plan("AddExperience", req, False)


def _modify(
    bank: str, id: str, text: str, confidence: Optional[float], domain: Optional[str], expected_version: Optional[int]
) -> _Plan:
    req = msg(
        bpb.ModifyExperienceRequest,
        bank=bank,
        id=id,
        text=text,
        confidence=confidence,
        domain=domain,
        expected_version=expected_version,
    )
    return _Plan("ModifyExperience", req, False)


def _merge(
    bank: str,
    ids: Sequence[str],
    text: str,
    confidence: Optional[float],
    domain: Optional[str],
    expected_version: Optional[int],
) -> _Plan:
    req = msg(
        bpb.MergeExperiencesRequest,
        bank=bank,
        ids=list(ids),
        text=text,
        confidence=confidence,
        domain=domain,
        expected_version=expected_version,
    )
    return _Plan("MergeExperiences", req, False)


def _apply(
    bank: str, operations: Operations, partial: bool, dry_run: bool, expected_version: Optional[int]
) -> _Plan:
    req = msg(
        bpb.ApplyOperationsRequest,
        bank=bank,
        operations_json=operations_json(operations),
        expected_version=expected_version,
        partial=bool(partial),
        dry_run=bool(dry_run),
    )
    return _Plan("ApplyOperations", req, False)


def _list_experiences(bank: str, page_size: int, page_token: str, domain: str) -> _Plan:
    req = bpb.ListExperiencesRequest(bank=bank, page_size=page_size, page_token=page_token, domain=domain or "")
    return _Plan("ListExperiences", req, True)


def _format(
    bank: str,
    query: str,
    top_k: int,
    domain: str,
    min_similarity: Optional[float],
    system: Optional[str],
    read_only: bool,
) -> _Plan:
    req = msg(
        bpb.FormatForPromptRequest,
        bank=bank,
        query=query or "",
        top_k=top_k,
        domain=domain or "",
        min_similarity=min_similarity,
        system=system,
        read_only=bool(read_only),
    )
    return _Plan("FormatForPrompt", req, bool(read_only) or not req.query.strip())


def _retrieve(
    bank: str, query: str, top_k: int, min_similarity: Optional[float], domain: str, read_only: bool
) -> _Plan:
    req = msg(
        bpb.RetrieveRequest,
        bank=bank,
        query=query,
        top_k=top_k,
        min_similarity=min_similarity,
        domain=domain or "",
        read_only=bool(read_only),
    )
    return _Plan("Retrieve", req, bool(read_only))


def _compress(
    bank: str,
    max_size: Optional[int],
    strategy: str,
    decay: Optional[float],
    seed: Optional[int],
    dry_run: bool,
    expected_version: Optional[int],
) -> _Plan:
    req = msg(
        bpb.CompressRequest,
        bank=bank,
        max_size=max_size,
        strategy=strategy or "",
        decay=decay,
        seed=seed,
        dry_run=bool(dry_run),
        expected_version=expected_version,
    )
    return _Plan("Compress", req, False)


def _merge_similar(
    bank: str, threshold: Optional[float], use_llm: bool, dry_run: bool, expected_version: Optional[int]
) -> _Plan:
    req = msg(
        bpb.MergeSimilarRequest,
        bank=bank,
        threshold=threshold,
        use_llm=bool(use_llm),
        dry_run=bool(dry_run),
        expected_version=expected_version,
    )
    return _Plan("MergeSimilar", req, False)


#: Over this many bytes of library, ``import_bank`` streams it (``ImportBankStream``): one gRPC message is capped
#: at 32 MiB, and a streamed import at 1 GiB.
STREAM_IMPORT_OVER = 16 * 1024 * 1024

#: Bytes per ``ImportBankStream`` message.
IMPORT_CHUNK_BYTES = 4 * 1024 * 1024


def _import(
    bank: str,
    format: Union[int, str],
    data: Union[str, Mapping[str, Any]],
    replace: bool,
    expected_version: Optional[int],
) -> _Plan:
    text = data if isinstance(data, str) else json.dumps(dict(data), ensure_ascii=False)
    fmt = pick(format, BANK_FORMATS, ("bank-format-", "bank-kind-"), "bank format")
    # Built first: it refuses a text with a lone surrogate (which has no UTF-8 bytes), naming the field.
    req = msg(bpb.ImportBankRequest, bank=bank, format=fmt, data=text, replace=bool(replace), expected_version=expected_version)
    if len(text) <= STREAM_IMPORT_OVER // 4 or req.ByteSize() <= STREAM_IMPORT_OVER:
        return _Plan("ImportBank", req, False)
    raw = req.data.encode("utf-8")
    # The options in the first message, the bytes in chunks (a chunk may end inside a character).
    step = max(1, IMPORT_CHUNK_BYTES)
    head = msg(bpb.ImportBankChunk, bank=bank, format=fmt, data=raw[:step], replace=bool(replace), expected_version=expected_version)
    chunks = [head] + [bpb.ImportBankChunk(data=raw[i : i + step]) for i in range(step, len(raw), step)]
    return _Plan("ImportBankStream", chunks, False)


def _stub(banks: Any, plan: _Plan) -> Any:
    """The stub method for ``plan``. A streamed plan's request is the list of its messages, handed over as a fresh
    iterator on every attempt (gRPC reads the messages with ``next``)."""
    rpc = getattr(banks, plan.rpc)
    if isinstance(plan.request, list):
        return lambda messages, **kwargs: rpc(iter(messages), **kwargs)
    return rpc


def _export(bank: str, format: Union[int, str]) -> _Plan:
    req = bpb.ExportBankRequest(bank=bank, format=pick(format, BANK_FORMATS, ("bank-format-", "bank-kind-"), "bank format"))
    return _Plan("ExportBank", req, True)


class BanksMixin:
    """The ``Banks`` calls of ``MemgymClient`` (blocking). Needs ``self._call`` and the stub ``self.banks``."""

    banks: Any
    _call: Any

    def _banks(self, plan: _Plan) -> Any:
        return self._call(f"Banks/{plan.rpc}", _stub(self.banks, plan), plan.request, idempotent=plan.idempotent)

    # -- banks --------------------------------------------------------------------------------
    def create_bank(
        self,
        name: str,
        *,
        kind: Union[None, int, str] = None,
        max_size: Optional[int] = None,
        if_not_exists: bool = False,
    ) -> bpb.Bank:
        """Creates a bank (ALREADY_EXISTS for a taken name unless ``if_not_exists``, which is then retried).

        ``kind``: "experience" (the default) or the enum; ``max_size``: Compress's default size (100).
        """
        return self._banks(_create_bank(name, kind, max_size, if_not_exists))

    def get_bank(self, name: str) -> bpb.Bank:
        """One bank's description: version, size, next_id, epoch, max_size, embedder."""
        return self._banks(_Plan("GetBank", bpb.GetBankRequest(name=name), True))

    def list_banks(self) -> bpb.ListBanksResponse:
        """Every bank, by name."""
        return self._banks(_Plan("ListBanks", bpb.ListBanksRequest(), True))

    def delete_bank(self, name: str, *, expected_version: Optional[int] = None) -> bpb.DeleteBankResponse:
        """Deletes a bank and its records; never retried."""
        req = msg(bpb.DeleteBankRequest, name=name, expected_version=expected_version)
        return self._banks(_Plan("DeleteBank", req, False))

    # -- experiences --------------------------------------------------------------------------
    def add_experience(
        self,
        bank: str,
        text: str,
        *,
        confidence: Optional[float] = None,
        domain: Optional[str] = None,
        epoch: Optional[int] = None,
        expected_version: Optional[int] = None,
        group_advantages: Optional[Sequence[float]] = None,
    ) -> bpb.WriteResponse:
        """Adds experience "G{N}" (``.id``); never retried, since a repeat would add it twice.

        ``group_advantages`` sets confidence = min(1, max − min); a group without variation is
        FAILED_PRECONDITION and adds nothing.
        """
        return self._banks(_add(bank, text, confidence, domain, epoch, expected_version, group_advantages))

    def modify_experience(
        self,
        bank: str,
        id: str,
        text: str,
        *,
        confidence: Optional[float] = None,
        domain: Optional[str] = None,
        expected_version: Optional[int] = None,
    ) -> bpb.WriteResponse:
        """Replaces an experience's text (NOT_FOUND for an unknown id); unset fields are kept."""
        return self._banks(_modify(bank, id, text, confidence, domain, expected_version))

    def delete_experience(self, bank: str, id: str, *, expected_version: Optional[int] = None) -> bpb.WriteResponse:
        """Deletes an experience (NOT_FOUND for an unknown id)."""
        req = msg(bpb.DeleteExperienceRequest, bank=bank, id=id, expected_version=expected_version)
        return self._banks(_Plan("DeleteExperience", req, False))

    def merge_experiences(
        self,
        bank: str,
        ids: Sequence[str],
        text: str,
        *,
        confidence: Optional[float] = None,
        domain: Optional[str] = None,
        expected_version: Optional[int] = None,
    ) -> bpb.WriteResponse:
        """Replaces two or more experiences by a new one (``.id``); the sources are removed."""
        return self._banks(_merge(bank, ids, text, confidence, domain, expected_version))

    def apply_operations(
        self,
        bank: str,
        operations: Operations,
        *,
        expected_version: Optional[int] = None,
        partial: bool = False,
        dry_run: bool = False,
    ) -> bpb.ApplyOperationsResponse:
        """Applies a batch of operations (list of dicts, or JSON text such as an LLM's reply).

        Atomic unless ``partial``: then what can be applied is, and ``.results`` says why the rest was not.
        """
        return self._banks(_apply(bank, operations, partial, dry_run, expected_version))

    def get_experience(self, bank: str, id: str) -> bpb.Experience:
        """One experience, with its usage."""
        return self._banks(_Plan("GetExperience", bpb.GetExperienceRequest(bank=bank, id=id), True))

    def list_experiences(
        self, bank: str, page_size: int = 0, page_token: str = "", domain: str = ""
    ) -> bpb.ListExperiencesResponse:
        """One page of the experiences in id order (``page_size`` default 100, at most 1,000)."""
        return self._banks(_list_experiences(bank, page_size, page_token, domain))

    def iter_experiences(self, bank: str, *, domain: str = "", page_size: int = 0) -> Iterator[bpb.Experience]:
        """Every experience in id order, fetching page after page (each page one retried read)."""
        token = ""
        while True:
            page = self.list_experiences(bank, page_size, token, domain)
            yield from page.experiences
            token = page.next_page_token
            if not token:
                return

    def format_for_prompt(
        self,
        bank: str,
        query: str = "",
        *,
        top_k: int = 0,
        domain: str = "",
        min_similarity: Optional[float] = None,
        system: Optional[str] = None,
        read_only: bool = False,
    ) -> bpb.FormatForPromptResponse:
        """``[G0]. text`` lines: every experience in id order, or with a ``query`` the ``top_k`` (10) most relevant.

        A query counts usage unless ``read_only``; ``system`` wraps the lines as the semantic-memory design injects them.
        """
        return self._banks(_format(bank, query, top_k, domain, min_similarity, system, read_only))

    # -- semantic memory ----------------------------------------------------------------------
    def retrieve(
        self,
        bank: str,
        query: str,
        *,
        top_k: int = 0,
        min_similarity: Optional[float] = None,
        domain: str = "",
        read_only: bool = False,
    ) -> bpb.RetrieveResponse:
        """The ``top_k`` (5) experiences most similar to ``query``, best first; counts usage unless ``read_only``."""
        return self._banks(_retrieve(bank, query, top_k, min_similarity, domain, read_only))

    def set_epoch(self, bank: str, epoch: int, *, expected_version: Optional[int] = None) -> bpb.WriteResponse:
        """The epoch new experiences and usage are stamped with."""
        req = msg(bpb.SetEpochRequest, bank=bank, epoch=epoch, expected_version=expected_version)
        return self._banks(_Plan("SetEpoch", req, False))

    def get_stats(self, bank: str) -> bpb.BankStats:
        """The semantic-memory design's ``get_memory_stats``: totals, average confidence, domains, usage."""
        return self._banks(_Plan("GetStats", bpb.GetStatsRequest(bank=bank), True))

    def compress(
        self,
        bank: str,
        *,
        max_size: Optional[int] = None,
        strategy: str = "",
        decay: Optional[float] = None,
        seed: Optional[int] = None,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
    ) -> bpb.CompressResponse:
        """Removes experiences until ``max_size`` remain ("diversity", "importance", "temporal", "hybrid")."""
        return self._banks(_compress(bank, max_size, strategy, decay, seed, dry_run, expected_version))

    def merge_similar(
        self,
        bank: str,
        *,
        threshold: Optional[float] = None,
        use_llm: bool = False,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
    ) -> bpb.MergeSimilarResponse:
        """Merges groups of near-duplicates (cosine >= ``threshold``, default 0.9); ``.merged`` counts the removed."""
        return self._banks(_merge_similar(bank, threshold, use_llm, dry_run, expected_version))

    # -- files --------------------------------------------------------------------------------
    def import_bank(
        self,
        bank: str,
        format: Union[int, str],
        data: Union[str, Mapping[str, Any]],
        *,
        replace: bool = False,
        expected_version: Optional[int] = None,
    ) -> bpb.ImportBankResponse:
        """Loads a library file (``format``: "seed", "upstream", "memgym" or the enum) into ``bank``, creating it.

        A file over ``STREAM_IMPORT_OVER`` bytes (16 MiB) is sent in ``ImportBankStream`` chunks: the same one write.
        """
        return self._banks(_import(bank, format, data, replace, expected_version))

    def export_bank(self, bank: str, format: Union[int, str]) -> bpb.ExportBankResponse:
        """The bank as a library file (``.data``) in ``format``."""
        return self._banks(_export(bank, format))


class AsyncBanksMixin:
    """The ``Banks`` calls of ``AsyncMemgymClient``, as coroutines; see ``BanksMixin`` for each."""

    banks: Any
    _call: Any

    async def _banks(self, plan: _Plan) -> Any:
        return await self._call(f"Banks/{plan.rpc}", _stub(self.banks, plan), plan.request, idempotent=plan.idempotent)

    async def create_bank(
        self,
        name: str,
        *,
        kind: Union[None, int, str] = None,
        max_size: Optional[int] = None,
        if_not_exists: bool = False,
    ) -> bpb.Bank:
        """See ``MemgymClient.create_bank``."""
        return await self._banks(_create_bank(name, kind, max_size, if_not_exists))

    async def get_bank(self, name: str) -> bpb.Bank:
        """See ``MemgymClient.get_bank``."""
        return await self._banks(_Plan("GetBank", bpb.GetBankRequest(name=name), True))

    async def list_banks(self) -> bpb.ListBanksResponse:
        """See ``MemgymClient.list_banks``."""
        return await self._banks(_Plan("ListBanks", bpb.ListBanksRequest(), True))

    async def delete_bank(self, name: str, *, expected_version: Optional[int] = None) -> bpb.DeleteBankResponse:
        """See ``MemgymClient.delete_bank``."""
        req = msg(bpb.DeleteBankRequest, name=name, expected_version=expected_version)
        return await self._banks(_Plan("DeleteBank", req, False))

    async def add_experience(
        self,
        bank: str,
        text: str,
        *,
        confidence: Optional[float] = None,
        domain: Optional[str] = None,
        epoch: Optional[int] = None,
        expected_version: Optional[int] = None,
        group_advantages: Optional[Sequence[float]] = None,
    ) -> bpb.WriteResponse:
        """See ``MemgymClient.add_experience`` (never retried)."""
        return await self._banks(_add(bank, text, confidence, domain, epoch, expected_version, group_advantages))

    async def modify_experience(
        self,
        bank: str,
        id: str,
        text: str,
        *,
        confidence: Optional[float] = None,
        domain: Optional[str] = None,
        expected_version: Optional[int] = None,
    ) -> bpb.WriteResponse:
        """See ``MemgymClient.modify_experience``."""
        return await self._banks(_modify(bank, id, text, confidence, domain, expected_version))

    async def delete_experience(
        self, bank: str, id: str, *, expected_version: Optional[int] = None
    ) -> bpb.WriteResponse:
        """See ``MemgymClient.delete_experience``."""
        req = msg(bpb.DeleteExperienceRequest, bank=bank, id=id, expected_version=expected_version)
        return await self._banks(_Plan("DeleteExperience", req, False))

    async def merge_experiences(
        self,
        bank: str,
        ids: Sequence[str],
        text: str,
        *,
        confidence: Optional[float] = None,
        domain: Optional[str] = None,
        expected_version: Optional[int] = None,
    ) -> bpb.WriteResponse:
        """See ``MemgymClient.merge_experiences``."""
        return await self._banks(_merge(bank, ids, text, confidence, domain, expected_version))

    async def apply_operations(
        self,
        bank: str,
        operations: Operations,
        *,
        expected_version: Optional[int] = None,
        partial: bool = False,
        dry_run: bool = False,
    ) -> bpb.ApplyOperationsResponse:
        """See ``MemgymClient.apply_operations``."""
        return await self._banks(_apply(bank, operations, partial, dry_run, expected_version))

    async def get_experience(self, bank: str, id: str) -> bpb.Experience:
        """See ``MemgymClient.get_experience``."""
        return await self._banks(_Plan("GetExperience", bpb.GetExperienceRequest(bank=bank, id=id), True))

    async def list_experiences(
        self, bank: str, page_size: int = 0, page_token: str = "", domain: str = ""
    ) -> bpb.ListExperiencesResponse:
        """See ``MemgymClient.list_experiences``."""
        return await self._banks(_list_experiences(bank, page_size, page_token, domain))

    async def iter_experiences(
        self, bank: str, *, domain: str = "", page_size: int = 0
    ) -> AsyncIterator[bpb.Experience]:
        """See ``MemgymClient.iter_experiences`` (``async for``)."""
        token = ""
        while True:
            page = await self.list_experiences(bank, page_size, token, domain)
            for experience in page.experiences:
                yield experience
            token = page.next_page_token
            if not token:
                return

    async def format_for_prompt(
        self,
        bank: str,
        query: str = "",
        *,
        top_k: int = 0,
        domain: str = "",
        min_similarity: Optional[float] = None,
        system: Optional[str] = None,
        read_only: bool = False,
    ) -> bpb.FormatForPromptResponse:
        """See ``MemgymClient.format_for_prompt``."""
        return await self._banks(_format(bank, query, top_k, domain, min_similarity, system, read_only))

    async def retrieve(
        self,
        bank: str,
        query: str,
        *,
        top_k: int = 0,
        min_similarity: Optional[float] = None,
        domain: str = "",
        read_only: bool = False,
    ) -> bpb.RetrieveResponse:
        """See ``MemgymClient.retrieve``."""
        return await self._banks(_retrieve(bank, query, top_k, min_similarity, domain, read_only))

    async def set_epoch(self, bank: str, epoch: int, *, expected_version: Optional[int] = None) -> bpb.WriteResponse:
        """See ``MemgymClient.set_epoch``."""
        req = msg(bpb.SetEpochRequest, bank=bank, epoch=epoch, expected_version=expected_version)
        return await self._banks(_Plan("SetEpoch", req, False))

    async def get_stats(self, bank: str) -> bpb.BankStats:
        """See ``MemgymClient.get_stats``."""
        return await self._banks(_Plan("GetStats", bpb.GetStatsRequest(bank=bank), True))

    async def compress(
        self,
        bank: str,
        *,
        max_size: Optional[int] = None,
        strategy: str = "",
        decay: Optional[float] = None,
        seed: Optional[int] = None,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
    ) -> bpb.CompressResponse:
        """See ``MemgymClient.compress``."""
        return await self._banks(_compress(bank, max_size, strategy, decay, seed, dry_run, expected_version))

    async def merge_similar(
        self,
        bank: str,
        *,
        threshold: Optional[float] = None,
        use_llm: bool = False,
        dry_run: bool = False,
        expected_version: Optional[int] = None,
    ) -> bpb.MergeSimilarResponse:
        """See ``MemgymClient.merge_similar``."""
        return await self._banks(_merge_similar(bank, threshold, use_llm, dry_run, expected_version))

    async def import_bank(
        self,
        bank: str,
        format: Union[int, str],
        data: Union[str, Mapping[str, Any]],
        *,
        replace: bool = False,
        expected_version: Optional[int] = None,
    ) -> bpb.ImportBankResponse:
        """See ``MemgymClient.import_bank``."""
        return await self._banks(_import(bank, format, data, replace, expected_version))

    async def export_bank(self, bank: str, format: Union[int, str]) -> bpb.ExportBankResponse:
        """See ``MemgymClient.export_bank``."""
        return await self._banks(_export(bank, format))
