import os
import pathlib
from typing import Any, Dict, List, Optional, Sequence, Union

__version__: str

_PathLike = Union[str, os.PathLike[str]]

class MemoryRsError(Exception):
    """Base class of every error memory_rs raises."""

class WorkspaceError(MemoryRsError):
    """The workspace folder does not exist or cannot be read."""

class ConfigError(MemoryRsError):
    """The config file cannot be read, or a key or value in it is wrong (the message names it)."""

class ClosedError(MemoryRsError):
    """The Memory was closed."""

class InvalidInputError(MemoryRsError):
    """An argument the engine refuses (a path outside the memory files, ...)."""

class NotFoundError(MemoryRsError):
    """What was asked for does not exist."""

class Hit:
    """One search result."""

    @property
    def path(self) -> str: ...
    @property
    def start_line(self) -> int: ...
    @property
    def end_line(self) -> int: ...
    @property
    def score(self) -> float: ...
    @property
    def snippet(self) -> str: ...
    @property
    def citation(self) -> str: ...
    @property
    def source(self) -> str: ...

class Document:
    """What ``Memory.get`` read."""

    @property
    def path(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def from_(self) -> int: ...
    @property
    def lines(self) -> int: ...
    @property
    def total_lines(self) -> int: ...
    @property
    def missing(self) -> bool: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def note(self) -> Optional[str]: ...
    @property
    def next_offset(self) -> Optional[int]: ...

class Recalled:
    """A curated entry whose trigger phrase matched the message given to ``Memory.recall``."""

    @property
    def path(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def trigger(self) -> str: ...
    @property
    def citation(self) -> str: ...

class Memory:
    def __new__(
        cls,
        workspace: _PathLike,
        config: Optional[_PathLike] = None,
        state_dir: Optional[_PathLike] = None,
        agent: str = "main",
    ) -> Memory: ...
    def __enter__(self) -> Memory: ...
    def __exit__(self, *exc: Any) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def workspace(self) -> pathlib.Path: ...
    def search(
        self,
        query: str,
        max_results: int = 6,
        min_score: Optional[float] = None,
        projects: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> List[Hit]: ...
    def get(self, path: str, from_: Optional[int] = None, lines: Optional[int] = None) -> Document: ...
    def append(self, text: str) -> Dict[str, Any]: ...
    def recall(self, message: str, projects: Optional[Sequence[str]] = None) -> List[Recalled]: ...
    def explain(
        self,
        query: str,
        path: Optional[str] = None,
        max_results: int = 6,
        min_score: Optional[float] = None,
        projects: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> Dict[str, Any]: ...
    def status(self) -> Dict[str, Any]: ...
    def index(self, force: bool = False) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    async def aexplain(
        self,
        query: str,
        path: Optional[str] = None,
        max_results: int = 6,
        min_score: Optional[float] = None,
        projects: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> Dict[str, Any]: ...
    async def asearch(
        self,
        query: str,
        max_results: int = 6,
        min_score: Optional[float] = None,
        projects: Optional[Sequence[str]] = None,
        after: Optional[str] = None,
        before: Optional[str] = None,
    ) -> List[Hit]: ...
    async def aget(self, path: str, from_: Optional[int] = None, lines: Optional[int] = None) -> Document: ...
    async def aappend(self, text: str) -> Dict[str, Any]: ...
    async def arecall(self, message: str, projects: Optional[Sequence[str]] = None) -> List[Recalled]: ...
    async def astatus(self) -> Dict[str, Any]: ...
    async def aindex(self, force: bool = False) -> Dict[str, Any]: ...
    async def aclose(self) -> None: ...
