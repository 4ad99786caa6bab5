"""A bounded, per-client-address fair queue for slow credential checks (bcrypt).

Each unremembered password costs a bcrypt round, so whoever can open connections can make the
server do that work. The queue bounds it: at most `max_pending` checks wait or run, at most
`max_per_peer` of them from one client address; a check over either bound is refused at once
(`QueueFull`, no work done). The next check to run is taken from the client addresses in turn,
not first-come-first-served, so a crowd at one address delays another address by one check at a
time, not by its whole backlog. A check whose client went away while it waited is dropped
instead of run (the answer `None`). Everything but the check itself runs on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field


class QueueFull(Exception):
    """Too many checks pending, in all or from this client address."""


@dataclass(eq=False)
class _Check:
    peer: str
    work: Callable[[], bool]
    gone: Callable[[], bool]
    """True once the client closed its connection: the answer would reach no one."""
    answer: asyncio.Future[bool | None] = field(repr=False)


class CheckQueue:
    """Runs `work` callables one at a time on `executor` (a thread of its own)."""

    def __init__(self, executor: Executor, max_pending: int, max_per_peer: int) -> None:
        self._executor = executor
        self.max_pending = max_pending
        self.max_per_peer = max_per_peer
        self._waiting: OrderedDict[str, deque[_Check]] = OrderedDict()
        """Waiting checks by client address, the address whose turn is next first."""
        self._per_peer: dict[str, int] = {}
        """Pending (waiting or running) checks by client address."""
        self._running: _Check | None = None
        self.pending = 0
        self.most_pending = 0
        """The most checks ever pending at once (never above `max_pending`)."""
        self.ran = 0
        """Checks run to the end."""

    async def run(
        self, peer: str, work: Callable[[], bool], gone: Callable[[], bool]
    ) -> bool | None:
        """`work()`'s answer, None if the client went away before its turn; raises QueueFull."""
        if self.pending >= self.max_pending:
            self._drop_gone()
        if self.pending >= self.max_pending or self._per_peer.get(peer, 0) >= self.max_per_peer:
            raise QueueFull
        check = _Check(peer, work, gone, asyncio.get_running_loop().create_future())
        self._waiting.setdefault(peer, deque()).append(check)
        self._per_peer[peer] = self._per_peer.get(peer, 0) + 1
        self.pending += 1
        self.most_pending = max(self.most_pending, self.pending)
        self._start_next()
        return await check.answer

    def _start_next(self) -> None:
        while self._running is None and self._waiting:
            peer, checks = next(iter(self._waiting.items()))
            check = checks.popleft()
            if checks:
                self._waiting.move_to_end(peer)  # its next check waits for the other addresses
            else:
                del self._waiting[peer]
            if check.answer.done() or check.gone():  # cancelled at stop, or the client left
                self._finish(check, None)
                continue
            self._running = check
            ran = asyncio.get_running_loop().run_in_executor(self._executor, check.work)
            ran.add_done_callback(functools.partial(self._ran, check))

    def _ran(self, check: _Check, done: asyncio.Future[bool]) -> None:
        self._running = None
        self.ran += 1
        error = done.exception()
        if error is not None and not check.answer.done():
            check.answer.set_exception(error)
        self._finish(check, None if error is not None else done.result())
        self._start_next()

    def _drop_gone(self) -> None:
        """Answer None to the waiting checks whose client left, freeing their places now."""
        for peer, checks in list(self._waiting.items()):
            for check in [c for c in checks if c.gone()]:
                checks.remove(check)
                self._finish(check, None)
            if not checks:
                del self._waiting[peer]

    def _finish(self, check: _Check, answer: bool | None) -> None:
        self.pending -= 1
        left = self._per_peer[check.peer] - 1
        if left:
            self._per_peer[check.peer] = left
        else:
            del self._per_peer[check.peer]
        if not check.answer.done():
            check.answer.set_result(answer)
