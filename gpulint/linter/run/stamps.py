"""What a run may know about a file from its stat data alone, as ruff's cache does.

A run's project index reads every Python file of the project (run/project.py); its cache entry
records, for each, the stat data it had when its bytes were hashed.  A later run takes a file whose
stat data is the recorded one to have the recorded bytes, without reading it; a file whose stat
data differs is read and hashed (so `touch` without an edit costs a hash, not a re-solve).

The stat data is the size, the modification time (ns), the inode and the status-change time (ns).
The size and the modification time are ruff's key; the other two close what they leave open:
a tool that rewrites a file and sets its modification time back (`touch -r`, `cp -p`, `rsync -t`,
an editor's atomic save keeping the time) cannot set the status-change time, which the kernel
sets to "now" on every write, rename or `utime`, and a file replaced by another has another inode.
Two cases remain, as for git's index:

* a file written twice within one tick of the filesystem's clock, the second time after it was
  hashed, with the same size, keeps its stat data.  A file changed less than `RACY_MARGIN_NS`
  before it was hashed is therefore recorded without stat data (`UNKNOWN`): the next run hashes it
  again, and records it once it is older;
* a file system whose times or inodes are not what the kernel gives (some network and FUSE file
  systems; Windows, where `st_ctime` is the creation time) is only as good as its times.  Any
  difference in the four values is a hash, never a wrong answer; equal values on a file that did
  change would be, which is why `--no-cache` exists.
"""

from __future__ import annotations

import os

# A file changed this recently before it was hashed is hashed again by the next run (two seconds:
# the coarsest timestamp tick in common use, FAT's).
RACY_MARGIN_NS = 2_000_000_000
# The stat data of a file recorded without any: never equal to a real file's.
UNKNOWN = (-1, -1, -1, -1)

Stamp = tuple[int, int, int, int]


def stamp_of(path: str | os.PathLike) -> Stamp | None:
    """(size, mtime_ns, inode, ctime_ns) of a file, following links as a read does; None when it
    cannot be stat'ed."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


def recordable(stamp: Stamp | None, hashed_after_ns: int) -> Stamp:
    """The stat data to record for a file stat'ed, then read at or after `hashed_after_ns`
    (time.time_ns()): its own, or UNKNOWN when it changed within RACY_MARGIN_NS of that."""
    if stamp is None or max(stamp[1], stamp[3]) > hashed_after_ns - RACY_MARGIN_NS:
        return UNKNOWN
    return stamp


def unchanged(path: str | os.PathLike, recorded: Stamp) -> bool:
    """Whether a path's stat data is still `recorded` (never when that is UNKNOWN)."""
    return recorded != UNKNOWN and stamp_of(path) == recorded
