"""The sync and async clients are one API: every public method of ``MemgymClient`` exists on
``AsyncMemgymClient`` with the same parameters (names, kinds, defaults and annotations), and the async one
is a coroutine (or an async generator, for the streaming calls). Each method is written twice, once per
client, so this is what keeps the two from drifting apart. Needs no server."""

import inspect

from memgym import AsyncMemgymClient, MemgymClient


def _public(cls):
    return {n: f for n, f in inspect.getmembers(cls, predicate=inspect.isfunction) if not n.startswith("_")}


def _params(f):
    return [(p.name, p.kind, p.default, p.annotation) for p in inspect.signature(f).parameters.values()]


def test_the_async_client_has_every_method_of_the_sync_one_with_the_same_parameters():
    sync, asynchronous = _public(MemgymClient), _public(AsyncMemgymClient)
    assert len(sync) >= 40
    assert set(sync) == set(asynchronous), sorted(set(sync) ^ set(asynchronous))
    for name in sorted(sync):
        assert _params(sync[name]) == _params(asynchronous[name]), (
            f"{name}: {inspect.signature(sync[name])} vs {inspect.signature(asynchronous[name])}"
        )
        f = asynchronous[name]
        assert inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f), f"AsyncMemgymClient.{name} is not async"
        assert not (inspect.iscoroutinefunction(sync[name]) or inspect.isasyncgenfunction(sync[name])), name
