"""The file effects a workspace's calls record (``records.FileEffect``): what a ``run_command`` program's
copy-back changed, bytes within a bound an episode. Shared by the tool transports the workflow's loop uses
(``transport``) and the served workspace's record (``mcp_server``), so every record of a call bounds and
writes them alike."""

from __future__ import annotations

from evoaudit.records import FileEffect
from evoaudit.suite.apex.base.workspace import Workspace

# The bytes of copied-back files one session records (``records.FileEffect.data``), smallest files of a
# call first: enough for the time stamps, random bytes and small reports programs write, and a bound on
# what programs add to a rollout, which the replay and report stages read whole (one call may copy back
# four times ``run_limits.file_size_mb``, 256 MiB by default). A file past it is recorded by its sha256
# alone, and replay cannot write its bytes: a nondeterministic one is then a mismatch.
RECORDED_EFFECT_BYTES = 1 << 20


class EffectsRecorder:
    """The file effects of a session's last call on ``ws``, recorded within ``RECORDED_EFFECT_BYTES``
    (one session: one episode). ``begin_call`` marks where a call starts."""

    def __init__(self, ws: Workspace):
        self.ws = ws
        self._since = len(ws.calls)  # where the current call's records begin
        self._left = RECORDED_EFFECT_BYTES
        self._recorded: tuple[int, list[FileEffect]] | None = None  # asked twice, counted once

    def begin_call(self) -> None:
        self._since = len(self.ws.calls)

    def file_effects(self) -> list[FileEffect]:
        """The files the last call's program changed (``run_command``'s copy-back), in the order applied;
        empty for any other call."""
        done = self.ws.copied_back
        if done is None or done.seq < self._since:
            return []
        if self._recorded is None or self._recorded[0] != done.seq:
            written = sorted((len(c.data), c.path) for c in done.changes if c.data is not None)
            kept = set()
            for size, path in written:
                if size <= self._left:
                    kept.add(path)
                    self._left -= size
            self._recorded = (done.seq, [_effect(c.path, c.data, c.path in kept) for c in done.changes])
        return list(self._recorded[1])


def _effect(path: str, data: bytes | None, keep_bytes: bool) -> FileEffect:
    return FileEffect.removed(path) if data is None else FileEffect.written(path, data, keep_bytes)
