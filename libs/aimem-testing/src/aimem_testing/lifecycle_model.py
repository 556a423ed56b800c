"""The reference model of the session/handoff lifecycle, for the model-based test.

DESIGN.md "Session lifecycle is a state machine" (issue 26); the test is
``tests/e2e/test_lifecycle_model.py``.

Pure Python, no I/O: the test drives the real stack and this model side by side and compares
them after every step. Times are the events' own times (epoch seconds, as the hook client
stamps them); ``seq`` is arrival order, which only breaks ties.

States. A session is ``open`` → ``ended`` (by its client or by the idle finaliser) →
``open`` again when events arrive later (reopened) → ... → ``purged``. A handoff is
``open`` → ``claimed`` | ``superseded`` (and back to ``open`` when the session that claimed
it ends without real work: it gives the claim back, with what the claim superseded).

Rules written down here (one line each, the spec they come from in brackets):

* every session that ends with real work (a prompt or a tool use) has exactly one open
  automatic handoff right after the end (a re-end refreshes the open one, or opens a new
  one when the old one was claimed meanwhile) ["every ended session with real work opens
  exactly one automatic handoff"];
* a child (OpenCode ``parentID``) or a subagent never claims and never opens one;
* a start claims only when it begins a new session with a claiming source (``startup``
  or none), never a resume/compact/clear, a session with events other than its starts, or a
  child; an offline start (the server never answered) gets nothing;
* the claimed one is the newest open handoff of the same place by event time (arrival
  breaks ties) that was opened before the session started; the idle finaliser's handoffs
  belong to the place like any other;
* a claim takes the heads of the place's open handoffs (those no other one follows: ``g``
  follows ``h`` when ``g``'s session began at or after ``h`` ended): the newest head and up
  to three parallel heads are delivered together and claimed by the same session; every other
  one is an earlier link of a chain and is superseded (docs/lifecycle.md);
* a late end (a drained spool, or the idle finaliser ending a late-drained session at its
  last event) whose place already has a claimed handoff of a session that began after it
  ended is born superseded by it [docs/lifecycle.md "Ordering by event time"];
* an imported (historical) session opens no handoff and claims nothing; importing events of
  a live session changes nothing (live capture wins);
* a purge deletes the session and the handoffs it authored.

``gaps`` (a set of ``KNOWN_GAPS`` names) switches a rule to the current, known-wrong
behaviour so the rest can still be checked before the fix lands: ``born_superseded`` (a late
end is born open even when a later session of its place already claimed newer work), ``idle_owner`` (the idle
finaliser's handoffs are never claimed or superseded), ``parallel_chain`` (a claim
supersedes every older eligible automatic handoff of the place), ``give_back_stale`` (a
claim given back reopens even when its author has re-ended since: two open handoffs of
one session).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLAIMING_SOURCES = frozenset({"startup", None})
MAX_PARALLEL = 3  # parallel sessions' handoffs delivered beside the newest one


@dataclass
class MSession:
    """One session as the model knows it."""

    sid: str
    client: str
    place: str
    started_at: float
    parent: str | None = None  # OpenCode child: its parent's session id
    state: str = "open"  # open | ended | purged
    real: bool = False
    last_at: float = 0.0
    ended_at: float | None = None
    end_by: str | None = None  # client | idle
    imported: bool = False
    offline: bool = False  # events queued in an unreachable client's spool, not yet delivered
    claimed: list[int] = field(default_factory=list)  # model handoff ids this session claimed (with parallel ones)
    events: bool = False  # had an event other than its starts (a known session then never claims)
    generations: int = 0  # how many times it ended with real work (re-ends of a reopened session)


@dataclass
class MHandoff:
    """One automatic handoff as the model knows it."""

    hid: int
    sid: str
    place: str
    at: float  # event time of the end that opened (or refreshed) it
    seq: int  # arrival order
    by_idle: bool
    status: str = "open"  # open | claimed | superseded
    claimed_by: str | None = None
    superseded_by: int | None = None


@dataclass
class Model:
    """The reference model: sessions, handoffs, and the step counter for the report."""

    gaps: frozenset[str] = frozenset()
    sessions: dict[str, MSession] = field(default_factory=dict)
    handoffs: dict[int, MHandoff] = field(default_factory=dict)
    seq: int = 0

    # -- helpers ---------------------------------------------------------------------------
    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def delivered(self, h: MHandoff) -> bool:
        """False while the end that opens ``h`` still waits in an offline client's spool."""
        s = self.sessions.get(h.sid)
        return s is None or not s.offline

    def open_handoff_of(self, sid: str) -> MHandoff | None:
        """The open handoff ``sid`` authored (at most one by the rules)."""
        return next((h for h in self.handoffs.values() if h.sid == sid and h.status == "open"), None)

    def claimable(self, place: str, sid: str, t: float) -> list[MHandoff]:
        """Open handoffs a new session ``sid`` in ``place`` starting at ``t`` may claim, best first."""
        out = [h for h in self.handoffs.values()
               if h.status == "open" and h.place == place and h.sid != sid and h.at < t and self.delivered(h)
               and not (h.by_idle and "idle_owner" in self.gaps)]
        return sorted(out, key=lambda h: (h.at, h.seq), reverse=True)

    # -- transitions -----------------------------------------------------------------------
    def start(self, sid: str, client: str, place: str, t: float, source: str | None, *,
              parent: str | None = None, offline: bool = False) -> MHandoff | None:
        """A session-start event; returns the handoff the model says is delivered (or None).

        A known id continues its session (reopens an ended one); only a new, online,
        non-child session with a claiming source claims.
        """
        s = self.sessions.get(sid)
        if s is not None:
            # A known session claims only while it has had nothing but starts (docs/lifecycle.md
            # "Which starts claim": a start repeated before any other event is still the start).
            known = s.events or s.parent is not None or s.offline
            self.event(sid, t, real=False, start=True)
            if known or source not in CLAIMING_SOURCES:
                return None
        else:
            s = MSession(sid, client, place, t, parent=parent, last_at=t, offline=offline)
            self.sessions[sid] = s
        if offline or parent is not None or source not in CLAIMING_SOURCES:
            return None
        cands = self.claimable(place, sid, t)
        if not cands:
            return None
        return self.claim(s, cands)

    def follows(self, g: MHandoff, h: MHandoff) -> bool:
        """``g``'s session began at or after ``h``'s work ended: one chain (else parallel)."""
        g_s = self.sessions.get(g.sid)
        return g.hid != h.hid and g_s is not None and g_s.started_at >= h.at

    def claim(self, s: MSession, cands: list[MHandoff]) -> MHandoff:
        """``s`` claims the heads of ``cands`` (those no other one follows): the newest is the
        handoff, up to three others (parallel sessions) are delivered and claimed with it; every
        other one is an earlier link of a chain: superseded. Returns the newest."""
        if "parallel_chain" in self.gaps:
            heads = cands[:1]
        else:
            heads = [h for h in cands if not any(self.follows(g, h) for g in cands)]
        delivered = heads[:1 + MAX_PARALLEL]
        for h in delivered:
            h.status, h.claimed_by = "claimed", s.sid
            s.claimed.append(h.hid)
        for o in cands:
            if o in heads:
                continue
            by = next((h for h in delivered if self.follows(h, o)), delivered[0])
            o.status, o.superseded_by = "superseded", by.hid
        return delivered[0]

    def event(self, sid: str, t: float, *, real: bool, start: bool = False) -> None:
        """Any other event of a known session: a later event reopens an ended session."""
        s = self.sessions[sid]
        s.events = s.events or not start
        s.last_at = max(s.last_at, t)
        s.real = s.real or real
        if s.state == "ended":
            s.state, s.ended_at, s.end_by = "open", None, None

    def end(self, sid: str, t: float, by: str) -> None:
        """End ``sid`` (``by`` = ``client`` or ``idle``): a handoff for real work, else give back."""
        s = self.sessions[sid]
        s.state, s.ended_at, s.end_by = "ended", t, by
        s.events = s.events or by == "client"
        if s.imported:
            return
        if s.parent is not None:
            return  # a child is part of its parent's work: no handoff of its own
        if s.real:
            s.generations += 1
            h = self.open_handoff_of(sid)
            if h is not None:  # refreshed in place: it keeps who opened it
                h.at, h.seq = t, self._next()
            else:
                hid = self._next()
                h = self.handoffs[hid] = MHandoff(hid, sid, s.place, t, hid, by == "idle")
            if not s.offline:  # the store sees the end now (an offline one when its spool drains)
                self.born_superseded(h)
            return
        for hid in s.claimed:  # nothing done with it: give the claims back
            h = self.handoffs.get(hid)
            if h is not None and h.status == "claimed" and h.claimed_by == sid:
                fresher = self.open_handoff_of(h.sid)
                if fresher is not None and "give_back_stale" not in self.gaps:
                    # its author resumed and re-ended meanwhile: one open handoff per session
                    h.status, h.claimed_by, h.superseded_by = "superseded", None, fresher.hid
                else:
                    h.status, h.claimed_by = "open", None
                    for o in self.handoffs.values():
                        if o.superseded_by == h.hid and o.status == "superseded":
                            o.status, o.superseded_by = "open", None
        s.claimed = []

    def born_superseded(self, h: MHandoff) -> None:
        """A late end whose place already has a claimed (or superseded) handoff of a session
        that began after it ended is born superseded by the newest such one: old work never
        becomes the next session's task (docs/lifecycle.md "Ordering by event time")."""
        if "born_superseded" in self.gaps or h.status != "open":
            return
        later = sorted((g for g in self.handoffs.values()
                        if g.place == h.place and g.status in ("claimed", "superseded") and self.follows(g, h)),
                       key=lambda g: (g.at, g.seq), reverse=True)
        if later:
            h.status, h.superseded_by = "superseded", later[0].hid

    def drained(self) -> None:
        """An offline machine's spool is delivered (late, with the events' old times): its
        ends reach the store now, in the order they were made."""
        late = {s.sid for s in self.sessions.values() if s.offline}
        for s in self.sessions.values():
            s.offline = False
        for h in sorted((h for h in self.handoffs.values() if h.sid in late), key=lambda h: h.seq):
            self.born_superseded(h)

    def idle(self) -> list[str]:
        """The idle finaliser with a tiny quiet period: every open, delivered session ends at
        its last event. Returns the ended ids."""
        open_ = [s for s in self.sessions.values() if s.state == "open" and not s.offline and not s.imported]
        ended = [s.sid for s in sorted(open_, key=lambda s: s.last_at)]  # the pass goes oldest first
        for sid in ended:
            self.end(sid, self.sessions[sid].last_at, "idle")
        return ended

    def imported_session(self, sid: str, client: str, place: str, t: float) -> None:
        """A historical session from ``POST /hook/import``: ended, no handoff, no claim."""
        self.sessions[sid] = MSession(sid, client, place, t, state="ended", last_at=t, ended_at=t,
                                      end_by="import", imported=True, real=True)

    def purge(self, sid: str) -> None:
        """``session.purge``: the session and the handoffs it authored are gone."""
        self.sessions[sid].state = "purged"
        for hid in [h.hid for h in self.handoffs.values() if h.sid == sid]:
            del self.handoffs[hid]
        for h in self.handoffs.values():
            if h.claimed_by == sid:
                h.claimed_by = None  # the claim keeps its text and loses the session pointer

    # -- expectations ----------------------------------------------------------------------
    def open_sids(self, place: str) -> set[str]:
        """Session ids whose automatic handoff is open in ``place``."""
        return {h.sid for h in self.handoffs.values() if h.place == place and h.status == "open" and self.delivered(h)}

    def open_sessions(self, place: str) -> set[str]:
        """Sessions the server knows as open in ``place`` (delivered, not ended, not purged)."""
        return {s.sid for s in self.sessions.values()
                if s.place == place and s.state == "open" and not s.offline}
