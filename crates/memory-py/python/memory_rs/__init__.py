"""memory-rs: a searchable Markdown memory for AI agents.

    from memory_rs import Memory
    with Memory("~/agent") as m:
        for hit in m.search("where does the gateway run?"):
            print(hit.citation, hit.score, hit.snippet)

Every call releases the GIL while the engine works; the ``a``-prefixed twins (``asearch``, ``aget``, ...) run
the same call on a worker thread for asyncio code. See docs/python.md.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _native
from ._native import (
    ClosedError,
    ConfigError,
    Document,
    Hit,
    InvalidInputError,
    MemoryRsError,
    NotFoundError,
    Recalled,
    WorkspaceError,
    __version__,
)

__all__ = [
    "Memory",
    "Hit",
    "Document",
    "Recalled",
    "MemoryRsError",
    "WorkspaceError",
    "ConfigError",
    "ClosedError",
    "InvalidInputError",
    "NotFoundError",
    "__version__",
]

_PathLike = Union[str, "os.PathLike[str]"]


def _path(p: Optional[_PathLike]) -> Optional[str]:
    # `~` is expanded here, as a shell would for the `memory` command.
    return None if p is None else os.path.expanduser(os.fspath(p))


class Memory(_native.Memory):
    """An agent's memory: the Markdown files of ``workspace`` (MEMORY.md, memory/**/*.md), indexed under
    ``state_dir`` (default ``$XDG_STATE_HOME/memory-rs`` or ``~/.local/state/memory-rs``, shared with the
    ``memory`` command). ``config`` is a JSON5 file with OpenClaw-compatible ``memory.*`` keys (an OpenClaw
    ``openclaw.json`` works as is); without it, keyword search on the builtin engine."""

    def __new__(
        cls,
        workspace: _PathLike,
        config: Optional[_PathLike] = None,
        state_dir: Optional[_PathLike] = None,
        agent: str = "main",
    ) -> "Memory":
        return super().__new__(cls, _path(workspace), _path(config), _path(state_dir), agent)

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return "Memory(closed)"
        return f"Memory({str(self.workspace)!r})"

    async def asearch(
        self,
        query: str,
        max_results: int = 6,
        min_score: Optional[float] = None,
        projects: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> List[Hit]:
        return await asyncio.to_thread(
            self.search, query, max_results, min_score, None if projects is None else list(projects), after, before
        )

    async def aexplain(
        self,
        query: str,
        path: Optional[str] = None,
        max_results: int = 6,
        min_score: Optional[float] = None,
        projects: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> Dict[str, Any]:
        return await asyncio.to_thread(
            self.explain, query, path, max_results, min_score, None if projects is None else list(projects), after, before
        )

    async def aget(self, path: str, from_: Optional[int] = None, lines: Optional[int] = None) -> Document:
        return await asyncio.to_thread(self.get, path, from_, lines)

    async def aappend(self, text: str) -> Dict[str, Any]:
        return await asyncio.to_thread(self.append, text)

    async def arecall(self, message: str, projects: Optional[Sequence[str]] = None) -> List[Recalled]:
        return await asyncio.to_thread(self.recall, message, None if projects is None else list(projects))

    async def astatus(self) -> Dict[str, Any]:
        return await asyncio.to_thread(self.status)

    async def aindex(self, force: bool = False) -> Dict[str, Any]:
        return await asyncio.to_thread(self.index, force)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
