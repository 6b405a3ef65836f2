"""Data-parallel learning of one model by several learners, merged by aligned averaging
(section 3.4 of the DoS paper; ``core.parallel`` is the in-process reference).

A model created with ``parallel: {"learners": k, "interval": N}`` (roles mode) is learned in
rounds. Round r starts from the model's latest snapshot M_r, at log position p_r: the log's
records after p_r hold the round's examples 0, 1, 2, ... in log order, and example e goes to
share ``e mod k`` (``core.parallel.deal``). The round ends with the record at which its
examples reach N (a record is never split, so a round of batched feedback may hold a few
more than N).

- **Shares.** Share i is learned by the learner holding its lease (``{prefix}:model:{<name>/
  <i>}:lease``, ``service.scale.leases``: placed, renewed, fenced and taken over like a
  model's): from M_r, in a copy of the model of its own (every member: challengers learn
  the same way), it learns its examples of the round; at the round's end it aligns each
  member's state to M_r's (``core.parallel.align_to``: the min-norm boost, eqs 15-16, then
  the Procrustes rotations, eqs 26-27) and writes the aligned vectors, checked against its
  lease in the script that writes them (``Rounds.write``). The last share also writes its
  whole state: the merged model keeps its scalars, service parts and group, as
  ``core.parallel.DataParallel`` keeps the last worker's.
- **Merge.** The model's owner (its own lease) waits for the k shares of the round, all
  started from the version it holds, and sets each member's floats to the mean of the
  aligned vectors (``core.parallel.tree_sum`` in share order, divided by k: eq 28); a
  member some share does not hold as it was at M_r (a drift challenger started in the
  round) is the last share's. The result is saved as M_{r+1} at the round's end position,
  fenced by the owner's lease, and published: the replicas load it, every share continues
  from it.

Recovery is M_r and the records after it dealt the same way: a share that is taken over
re-learns its part of the round from the log, bit for bit what its first owner learned,
and a change of the model outside the log (a challenger added, a promotion) makes every
share learn the round again from the new version. The merged snapshots are the only state
that must survive; the log is trimmed up to them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import numpy as np

from core.features import batch_from_rows
from core.parallel import align_to, deal, tree_sum
from service.durability.feedback_log import LogCorrupt, after, decode_keyed
from service.durability.store import decode
from service.ops import failpoints
from service.scale.keys import RedisKeys
from service.scale.leases import LeaseLost

log = logging.getLogger("lorentztron.parallel")

#: KEYS: the share's lease, its round hash; ARGV: lease value, then field, value pairs. The
#: round's hash replaced whole, if the lease still holds that value.
_WRITE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 'FENCED' end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 2))
return 'OK'
"""

#: the hash field of a member's aligned vector
ALIGNED = "aligned:"


share_name, split_share = RedisKeys.share, RedisKeys.split_share


@dataclass(frozen=True)
class RoundMeta:
    """What a share wrote of a round: the model's incarnation, the version it started from
    (``base``) and its log position (``start``), the positions of the round's first and
    last records (``first``, ``end``), the round's examples and records, the learner that
    wrote it, and what each member it aligned learned in the round (examples, aggressive
    updates)."""

    incarnation: str
    base: int
    start: str | None
    first: str
    end: str
    examples: int
    records: int
    learner: str
    counters: dict

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @staticmethod
    def from_json(text: bytes | str) -> RoundMeta:
        return RoundMeta(**json.loads(text))


class Rounds:
    """The shares' rounds in Redis: ``{prefix}:model:{<name>/<i>}:round``, a hash of the
    round's ``meta``, one ``aligned:<member>`` vector per member (float64 bytes), and the
    last share's ``state`` (a snapshot blob); ``...:progress``, the share's position (for
    ``GET /v1/models/{name}``)."""

    def __init__(self, client, keys: RedisKeys):
        self.client = client
        self.keys = keys
        self._write = client.register_script(_WRITE)

    def write(self, name: str, share: int, fence: str, fields: dict[str, bytes]) -> None:
        """Replace share ``share``'s round, if its lease is still ``fence`` (else LeaseLost)."""
        unit = share_name(name, share)
        args = [fence]
        for field, value in fields.items():
            args += [field, value]
        reply = self._write(keys=[self.keys.lease(unit), self.keys.model(unit, "round")], args=args)
        if (reply.decode() if isinstance(reply, bytes) else reply) != "OK":
            raise LeaseLost(f"the lease on {unit!r} was lost: round write refused")

    def metas(self, name: str, k: int) -> list[RoundMeta | None]:
        pipe = self.client.pipeline(transaction=False)
        for share in range(k):
            pipe.hget(self.keys.model(share_name(name, share), "round"), "meta")
        return [None if m is None else RoundMeta.from_json(m) for m in pipe.execute()]

    def fields(self, name: str, k: int, fields: list[str]) -> list[list[bytes | None]]:
        """The ``fields`` of each of the k shares' rounds (one round trip)."""
        pipe = self.client.pipeline(transaction=False)
        for share in range(k):
            pipe.hmget(self.keys.model(share_name(name, share), "round"), fields)
        return pipe.execute()

    def progress(self, name: str, share: int, learner: str, position) -> None:
        self.client.set(
            self.keys.model(share_name(name, share), "progress"),
            json.dumps({"learner": learner, "position": position}),
        )

    def shares(self, name: str, k: int) -> list[dict]:
        """Each share's learner (its lease's holder, None: none now) and log position (the
        last record its learner read; None: none yet)."""
        pipe = self.client.pipeline(transaction=False)
        for share in range(k):
            unit = share_name(name, share)
            pipe.get(self.keys.lease(unit))
            pipe.get(self.keys.model(unit, "progress"))
        replies = pipe.execute()
        shares = []
        for share in range(k):
            lease, progress = replies[2 * share : 2 * share + 2]
            position = json.loads(progress)["position"] if progress is not None else None
            learner = None if lease is None else lease.decode().rsplit(" ", 1)[0]
            shares.append({"share": share, "learner": learner, "position": position})
        return shares


class Share:
    """One share of a parallel model, learned in this learner (module docstring): a copy of
    the model at the round's start, what it has read of the round, and the members' states
    at the start (the reference of the alignment)."""

    #: records read from the log at a time, at most
    chunk = 1000

    def __init__(self, name: str, share: int, fence: str, learner):
        self.name = name
        self.share = share
        self.fence = fence
        self.learner = learner
        self.live = None  # the copy, built by ``begin``
        self.base: int | None = None
        self.start = None
        self.position = None
        self.examples = 0
        self.records = 0
        self.done = False
        self.first = None
        #: member name -> (the member, its state and counters at the round's start)
        self.references: dict[str, tuple] = {}
        #: examples and records read by this share in all its rounds (``_count``)
        self.read = [0, 0]

    @property
    def k(self) -> int:
        return self.live.group.policy.parallel.learners

    @property
    def interval(self) -> int:
        return self.live.group.policy.parallel.interval

    def begin(self, blob: bytes) -> None:
        """Start the round of the snapshot ``blob`` (the model's latest)."""
        header, state = decode(blob)
        self.live = self.learner.models.copy_of(self.name, header, state)
        self.base, self.start = header["version"], header.get("log_position")
        self.position, self.examples, self.records, self.done = self.start, 0, 0, False
        self.first = None
        self.references = {
            member.name: (member, _copied(member.estimator.get_state()), member.counters[:2])
            for member in self.live.group.members()
        }

    def step(self, client, log_key: str) -> bool:
        """Learn what the log holds of this share's round after what it read: whether it
        read anything. At the round's end, its aligned states are written."""
        if self.done or self.live.group.paused:  # (paused: resumed by a new version)
            return False
        start = "-" if self.position is None else f"({self.position}"
        entries = client.xrange(log_key, min=start, count=self._count())
        k, interval = self.k, self.interval
        for position, fields in entries:
            position = position.decode()
            if not after(position, self.position):
                continue
            try:
                batch, targets, _, _ = decode_keyed(fields[b"r"])
            except LogCorrupt as error:
                raise LogCorrupt(f"log record {position} of {self.name}: {error}") from None
            rows = deal(self.examples, batch.n_rows, k)[self.share]
            if rows.size:
                part = batch_from_rows([batch.row(int(i)) for i in rows])
                self.live.learn_part(position, part, targets[rows])
            self.examples += batch.n_rows
            self.records += 1
            self.read[0] += batch.n_rows
            self.read[1] += 1
            self.first = self.first or position
            self.position = position
            if self.examples >= interval:
                self.finish()
                break
        return bool(entries)

    def _count(self) -> int:
        """Records to read next: about as many as the round still needs at the mean examples
        per record read so far (one before any), at most ``chunk``. Every share reads every
        record of the log; one that read ``chunk`` records at a time would read, at each
        round's end, records of later rounds for nothing (a backlog of large batches: all
        of it, at every round)."""
        examples, records = self.read
        if not records:
            return 1
        needed = (self.interval - self.examples) * records / max(examples, 1)
        return max(1, min(self.chunk, int(np.ceil(needed))))

    def finish(self) -> None:
        """The round's end: each member's state aligned to its state at the start (a member
        started in the round is not aligned: it merges as the last share's), written with
        the round's meta (and the last share's whole state) under the share's lease."""
        fields: dict[str, bytes] = {}
        counters = {}
        with self.live.reading():
            for member in self.live.group.members():
                reference = self.references.get(member.name)
                if reference is None or reference[0] is not member:
                    continue
                counters[member.name] = [
                    int(a - b) for a, b in zip(member.counters[:2], reference[2], strict=True)
                ]
                aligned = align_to(reference[1], member.estimator.get_state())
                fields[ALIGNED + member.name] = aligned.tobytes()
        if self.share == self.k - 1:  # (nothing else learns this copy: the same state)
            capture = self.live.snapshot_state()
            fields["state"] = bytes(self.learner.models.writer.encode(self.live, capture))
        meta = RoundMeta(
            self.live.incarnation,
            self.base,
            self.start,
            self.first,
            self.position,
            self.examples,
            self.records,
            self.learner.id,
            counters,
        )
        fields["meta"] = meta.to_json().encode()
        failpoints.reach("parallel.round")
        self.learner.rounds.write(self.name, self.share, self.fence, fields)
        self.done = True
        log.info(
            "share %d of %s: round from version %d learned (%d examples)",
            self.share,
            self.name,
            self.base,
            self.examples,
        )


def _copied(state: dict) -> dict:
    """A state whose arrays are copies (``get_state`` may give views of live arrays)."""
    return {**state, "arrays": {n: np.array(a, copy=True) for n, a in state["arrays"].items()}}


def merge_round(live, rounds: Rounds, k: int) -> RoundMeta | None:
    """Merge the k shares' round into ``live``, the owner's copy at the version they all
    started from (module docstring): the round's meta, or None (nothing done) if some share
    has not written it yet."""
    metas = rounds.metas(live.name, k)
    if any(m is None or m.base != live.version or m.incarnation != live.incarnation for m in metas):
        return None
    if len({(m.start, m.end) for m in metas}) != 1:
        raise ValueError(f"the shares of {live.name} disagree on the round: {metas}")
    last = metas[-1]
    names = list(last.counters)  # (the members the last share aligned)
    replies = rounds.fields(live.name, k, ["state", *(ALIGNED + n for n in names)])
    _, state = decode(replies[-1][0])  # (only the last share writes its state)
    vectors = [reply[1:] for reply in replies]
    means, counts = {}, {}
    for column, name in enumerate(names):
        parts = [row[column] for row in vectors]
        if any(part is None for part in parts):
            continue  # (started in the round by some share: the last share's own)
        rows = np.stack([np.frombuffer(part, dtype=np.float64) for part in parts])
        means[name] = tree_sum(rows) / k
        # the last share's counters are loaded with its state: the others' examples join
        # (none when k = 1)
        others = [meta.counters[name] for meta in metas[:-1]]
        counts[name] = np.array(others, dtype=int).reshape(-1, 2).sum(axis=0)
    failpoints.reach("parallel.merge")
    if live.load_merged(last.base, state, means, counts, last.first, last.end, last.records):
        return last
    return None
