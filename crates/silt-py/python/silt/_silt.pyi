"""Type stubs of the extension module ``silt._silt`` (``crates/silt-py/src``).

Kept in step with the Rust signatures: the test suite runs ``mypy.stubtest`` on them when
mypy is installed (``tests/test_stubs.py``).
"""

import os
from pathlib import Path
from types import TracebackType
from typing import Any, Callable, Dict, Generic, List, Literal, Optional, Tuple, Type, TypeVar, TypedDict, Union, final, overload

from typing_extensions import Self

__all__ = [
    "BackupStore",
    "ColumnFamily",
    "DEFAULT_CF",
    "Db",
    "Iter",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "Snapshot",
    "Transaction",
    "WriteBatch",
    "repair",
]

_Key = Union[bytes, bytearray, memoryview, str]
"""A key: bytes-like, or a str with ``Db(..., str_keys=True)`` (encoded as UTF-8)."""
_Value = Union[bytes, bytearray, memoryview]
"""A value: bytes-like (str is refused: encode it)."""
_CfArg = Union["ColumnFamily", str, None]
"""A column family: a handle, its name, or None for the default one."""

_Isolation = Literal["read_uncommitted", "read_committed", "repeatable_read", "snapshot", "serializable"]
"""A transaction's isolation level (``docs/design.md``, "Transactions", has what each prevents)."""
_Mode = Literal["optimistic", "pessimistic"]
"""A transaction's concurrency control."""

_T = TypeVar("_T")
_D = TypeVar("_D")
_R = TypeVar("_R")

class _CheckpointInfo(TypedDict):
    dir: str
    seqno: int
    files_linked: int
    files_copied: int
    bytes_copied: int
    log_segments: int

class _BackupInfo(TypedDict):
    id: int
    created_unix_secs: int
    seqno: int
    files: int
    bytes: int
    new_files: int
    new_bytes: int

class _RepairReport(TypedDict):
    manifest_error: Optional[str]
    tables_recovered: int
    blob_files_recovered: int
    damaged: List[Tuple[str, str]]
    assumed_default: List[str]
    cfs_recreated: List[str]
    records_recovered: int
    log_damage: Optional[str]
    tables_written: int
    set_aside: List[Tuple[str, str]]

MAX_KEY_BYTES: int
MAX_VALUE_BYTES: int
DEFAULT_CF: str

# Not subclassable (a Rust struct).
@final
class Iter(Generic[_T]):
    """An iterator over a key range of a database, snapshot or transaction, in key
    order (or reverse); one consistent view; keeps the database open while it lives."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> _T: ...
    def close(self) -> None: ...

# Not subclassable (a Rust struct).
@final
class Db:
    """An open silt database; see ``help(silt.Db)`` for the options."""

    def __new__(
        cls,
        path: Union[str, "os.PathLike[str]"],
        *,
        sync: Literal["none", "interval", "full"] = ...,
        sync_interval: float = ...,
        str_keys: bool = ...,
        read_only: bool = ...,
        create_if_missing: bool = ...,
        paranoid_checks: bool = ...,
        memtable_bytes: int = ...,
        immutable_memtables_max: int = ...,
        memtable_scan_flush_trigger: int = ...,
        memtable_bloom_ratio: float = ...,
        block_cache_bytes: int = ...,
        table_cache_tables: int = ...,
        block_size_bytes: int = ...,
        bloom_bits_per_key: int = ...,
        compression: str = ...,
        level_size_ratio: int = ...,
        level_base_bytes: int = ...,
        table_target_bytes: int = ...,
        l0_compaction_trigger: int = ...,
        l0_stall_tables: int = ...,
        l0_slowdown_tables: int = ...,
        background_threads: int = ...,
        wal_segment_bytes: int = ...,
        blob_threshold_bytes: Optional[int] = ...,
        blob_gc_garbage_ratio: float = ...,
        stats_dump_period: Optional[float] = ...,
    ) -> "Db": ...
    @overload
    def get(self, key: _Key, default: None = None, *, cf: _CfArg = None) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Key, default: _D, *, cf: _CfArg = None) -> Union[bytes, _D]: ...
    def put(self, key: _Key, value: _Value, *, cf: _CfArg = None, sync: Optional[bool] = None) -> None: ...
    def delete(self, key: _Key, *, cf: _CfArg = None, sync: Optional[bool] = None) -> None: ...
    def __getitem__(self, key: _Key, /) -> bytes: ...
    def __setitem__(self, key: _Key, value: _Value, /) -> None: ...
    def __delitem__(self, key: _Key, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iter[bytes]: ...
    def range(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, reverse: bool = False, cf: _CfArg = None
    ) -> Iter[Tuple[bytes, bytes]]: ...
    def prefix(self, prefix: _Key, *, reverse: bool = False, cf: _CfArg = None) -> Iter[Tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[bytes]: ...
    def values(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[bytes]: ...
    def items(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[Tuple[bytes, bytes]]: ...
    def batch(self, *, sync: Optional[bool] = None) -> "WriteBatch": ...
    def write(self, batch: "WriteBatch", *, sync: Optional[bool] = None) -> None: ...
    def snapshot(self) -> "Snapshot": ...
    def transaction(
        self,
        *,
        isolation: _Isolation = "snapshot",
        mode: _Mode = "optimistic",
        sync: Optional[bool] = None,
        lock_timeout: float = 1.0,
        max_bytes: Optional[int] = None,
    ) -> "Transaction": ...
    def transact(
        self,
        func: Callable[["Transaction"], _R],
        *,
        isolation: _Isolation = "snapshot",
        mode: _Mode = "optimistic",
        sync: Optional[bool] = None,
        lock_timeout: float = 1.0,
        max_bytes: Optional[int] = None,
        max_retries: int = 16,
    ) -> _R: ...
    def lock_waits(self) -> List[Tuple[int, List[int]]]: ...
    def create_cf(self, name: str) -> "ColumnFamily": ...
    def cf(self, name: str) -> "ColumnFamily": ...
    def drop_cf(self, cf: Union["ColumnFamily", str]) -> None: ...
    def list_cfs(self) -> List[str]: ...
    def sync(self) -> None: ...
    def flush(self) -> None: ...
    def compact_range(self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, cf: _CfArg = None) -> None: ...
    def wait_for_compactions(self, timeout: float = 60.0) -> bool: ...
    def checkpoint(self, dir: Union[str, "os.PathLike[str]"]) -> _CheckpointInfo: ...
    def stats(self) -> Dict[str, Any]: ...
    def background_error(self) -> Optional[str]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> Path: ...
    @property
    def str_keys(self) -> bool: ...
    @property
    def read_only(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

# Not subclassable (a Rust struct).
@final
class ColumnFamily:
    """A column family of a database, with the database's dict-like surface."""

    @property
    def name(self) -> str: ...
    @overload
    def get(self, key: _Key, default: None = None) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Key, default: _D) -> Union[bytes, _D]: ...
    def put(self, key: _Key, value: _Value, *, sync: Optional[bool] = None) -> None: ...
    def delete(self, key: _Key, *, sync: Optional[bool] = None) -> None: ...
    def __getitem__(self, key: _Key, /) -> bytes: ...
    def __setitem__(self, key: _Key, value: _Value, /) -> None: ...
    def __delitem__(self, key: _Key, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iter[bytes]: ...
    def range(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, reverse: bool = False
    ) -> Iter[Tuple[bytes, bytes]]: ...
    def prefix(self, prefix: _Key, *, reverse: bool = False) -> Iter[Tuple[bytes, bytes]]: ...
    def keys(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, prefix: Optional[_Key] = None, reverse: bool = False
    ) -> Iter[bytes]: ...
    def values(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, prefix: Optional[_Key] = None, reverse: bool = False
    ) -> Iter[bytes]: ...
    def items(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, prefix: Optional[_Key] = None, reverse: bool = False
    ) -> Iter[Tuple[bytes, bytes]]: ...

# Not subclassable (a Rust struct).
@final
class WriteBatch:
    """Writes applied all or nothing, across column families, from ``Db.batch()``."""

    def put(self, key: _Key, value: _Value, *, cf: _CfArg = None) -> None: ...
    def delete(self, key: _Key, *, cf: _CfArg = None) -> None: ...
    def __setitem__(self, key: _Key, value: _Value, /) -> None: ...
    def __delitem__(self, key: _Key, /) -> None: ...
    def __len__(self) -> int: ...
    def clear(self) -> None: ...
    def write(self, *, sync: Optional[bool] = None) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

# Not subclassable (a Rust struct).
@final
class Snapshot:
    """A consistent read view of a database, from ``Db.snapshot()``."""

    @overload
    def get(self, key: _Key, default: None = None, *, cf: _CfArg = None) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Key, default: _D, *, cf: _CfArg = None) -> Union[bytes, _D]: ...
    def __getitem__(self, key: _Key, /) -> bytes: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iter[bytes]: ...
    def range(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, reverse: bool = False, cf: _CfArg = None
    ) -> Iter[Tuple[bytes, bytes]]: ...
    def prefix(self, prefix: _Key, *, reverse: bool = False, cf: _CfArg = None) -> Iter[Tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[bytes]: ...
    def values(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[bytes]: ...
    def items(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[Tuple[bytes, bytes]]: ...
    @property
    def seqno(self) -> int: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

# Not subclassable (a Rust struct).
@final
class Transaction:
    """A transaction, from ``Db.transaction()``; see ``help(silt.Transaction)``."""

    @overload
    def get(self, key: _Key, default: None = None, *, cf: _CfArg = None) -> Optional[bytes]: ...
    @overload
    def get(self, key: _Key, default: _D, *, cf: _CfArg = None) -> Union[bytes, _D]: ...
    @overload
    def get_for_update(self, key: _Key, default: None = None, *, cf: _CfArg = None) -> Optional[bytes]: ...
    @overload
    def get_for_update(self, key: _Key, default: _D, *, cf: _CfArg = None) -> Union[bytes, _D]: ...
    def put(self, key: _Key, value: _Value, *, cf: _CfArg = None) -> None: ...
    def delete(self, key: _Key, *, cf: _CfArg = None) -> None: ...
    def single_delete(self, key: _Key, *, cf: _CfArg = None) -> None: ...
    def __getitem__(self, key: _Key, /) -> bytes: ...
    def __setitem__(self, key: _Key, value: _Value, /) -> None: ...
    def __delitem__(self, key: _Key, /) -> None: ...
    def __contains__(self, key: object, /) -> bool: ...
    def __iter__(self) -> Iter[bytes]: ...
    def range(
        self, start: Optional[_Key] = None, end: Optional[_Key] = None, *, reverse: bool = False, cf: _CfArg = None
    ) -> Iter[Tuple[bytes, bytes]]: ...
    def prefix(self, prefix: _Key, *, reverse: bool = False, cf: _CfArg = None) -> Iter[Tuple[bytes, bytes]]: ...
    def keys(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[bytes]: ...
    def values(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[bytes]: ...
    def items(
        self,
        start: Optional[_Key] = None,
        end: Optional[_Key] = None,
        *,
        prefix: Optional[_Key] = None,
        reverse: bool = False,
        cf: _CfArg = None,
    ) -> Iter[Tuple[bytes, bytes]]: ...
    def savepoint(self) -> None: ...
    def rollback_to_savepoint(self) -> None: ...
    def pop_savepoint(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    @property
    def pending(self) -> Tuple[int, int]: ...
    @property
    def id(self) -> int: ...
    @property
    def snapshot_seqno(self) -> int: ...
    @property
    def isolation(self) -> _Isolation: ...
    @property
    def mode(self) -> _Mode: ...
    @property
    def state(self) -> Literal["active", "committed", "rolled_back", "failed"]: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool: ...

# Not subclassable (a Rust struct).
@final
class BackupStore:
    """A directory of incremental, checksummed backups; see ``help(silt.BackupStore)``."""

    def __new__(cls, path: Union[str, "os.PathLike[str]"]) -> "BackupStore": ...
    def create(self, db: Db) -> _BackupInfo: ...
    def list(self) -> List[_BackupInfo]: ...
    def verify(self, id: int) -> _BackupInfo: ...
    def restore(self, id: int, target: Union[str, "os.PathLike[str]"]) -> _BackupInfo: ...
    def purge_old(self, keep: int) -> List[int]: ...
    @property
    def path(self) -> Path: ...

def repair(path: Union[str, "os.PathLike[str]"]) -> _RepairReport:
    """Rebuilds the manifest of the database at ``path`` from its files; see ``help(silt.repair)``."""
