/*
 * hold.pml: a hold as one state machine (issue 29, stage 2; docs/design.md,
 * "Next: a hold as one state machine"). A specification model, written
 * before the code restructure: the hold of one lock name by one holder
 * field of Client A, whose every change is one of the spec's events, each
 * an inline of the same name, each made holding the hold's turn (except
 * lossJudged's cancelling of the Helds, which the spec makes at once).
 *
 *   A: goroutines G0 and G1 of one owner (one field, one hold), a settler
 *      (one per Client), the watchdog (renewals, loss judging), Close.
 *      G0: Lock(K0); Unlock; Lock(K1, Lease SLEASE); Unlock.
 *      G1: Lock(K0) (a re-entry while G0 holds, or a first hold); Unlock.
 *   B: another Client, competing for the name as KB.
 *   Redis: one master running scripts atomically, with one replica (a
 *      snapshot brought up to date by an acknowledged WAIT), a link cut
 *      and a failover that promotes the replica; lease expiry by an
 *      abstract clock.
 *
 * Kinds are values: the protocol table P_* (layout, whether holders of
 * the kind share, whether a re-entry adds a lease) is the only place a
 * kind is looked at.
 *
 * Properties (asserts; see README.md "The hold state machine"):
 *   P1 exclusion: no live Held of A (its context not ended) while the
 *      current master grants the name to B as an incompatible kind; and
 *      a key holding A's field never expires under a live Held of A;
 *   P2 the key is free at most one lease after the last extension of the
 *      acquisition it holds: no renewal of an earlier acquisition, no
 *      re-entry, extends it beyond that (R3-6, R3-11);
 *   P3 count agrees with Redis when nothing is unsettled or in flight;
 *   P4 after Close returns, nothing of A is in Redis unless Close's error
 *      lists it;
 *   P5 no invalid end state: every goroutine finishes.
 *
 * Switches (all off = the specification):
 *   R31   a lost ROLE reply switches WAIT off (safety-3 R3-1)
 *   R33   no retire (the kind is switched, strays adopted by the new kind)
 *         and scripts that count another kind's hash (safety-3 R3-3)
 *   R36   a new acquisition does not wait for a renewal given up on
 *         (watchdog.Registry.Quiet): that renewal lands after the release
 *         and stretches the next explicit lease (safety-3 R3-6; the code
 *         as of 21b2ad8)
 *   STRAYONLY  Quiet waits only for a renewal given up on, not for one of a
 *         tick in flight whose entry a loss dropped (the first version of
 *         Quiet, before this model found it)
 *   TOKEN the renewal is bound to its acquisition by a token the renew
 *         script checks instead (the model's first amendment for R3-6;
 *         not the code: Redisson reads every hash field as a holder)
 *   R311  a write re-entry adds a lease to the key's time left
 *         (safety-3 R3-11; acquire_write.lua as of 9537557)
 *   CLOSE_NOP  Close marks the Client closed and returns, nothing else
 *   M1    the give-back is sent without the turn and the caller retries
 *         at once (rlock.pml M1)
 *   M3    a stray release is sent with no in-flight check (rlock.pml M3)
 *   M4    a re-entry PEXPIREs its own lease, not max(PTTL, lease)
 *         (rlock.pml M4; a counterexample needs RI >= G1L: hold-M4)
 *   M5    an entry with a release in flight is neither renewed nor judged
 *   M7    an acquire answered after it was sent again is not settled
 *   M8    the settlement reads the count and writes no fence
 * Configuration: K0, K1, KB (kinds: 0 plain, 1 read, 2 write); budgets
 * B_LREQ, B_LREP, B_DLY (a request outlives its sender's wait: it lands
 * late), B_RGU (a renewal given up on), B_ROLE (lost ROLE replies), B_CUT,
 * B_FO (failover), B_CLOSE (Close is called), B_LSET (lost settlements);
 * LEASE, RI (a renewal every RI ticks), G1L (G1's lease).
 */

#ifndef LEASE
#define LEASE 3           /* the watchdog lease, ticks */
#endif
#ifndef SLEASE
#define SLEASE 2          /* G0's explicit Lease */
#endif
#ifndef RI
#define RI 1              /* a renewal is due RI ticks after the last (LEASE >= RI + 2) */
#endif
#define MARGIN 1          /* the loss is judged at deadline - MARGIN (no drift) */
#define NID 3             /* request ids of A (reused once nothing names them) */
#define NS 2              /* A's connections for count-changing requests */

#ifndef K0
#define K0 0
#endif
#ifndef K1
#define K1 1
#endif
#ifndef KB
#define KB 0
#endif
#ifndef B_LREQ
#define B_LREQ 1
#endif
#ifndef B_LREP
#define B_LREP 1
#endif
#ifndef B_DLY
#define B_DLY 1
#endif
#ifndef B_RGU
#define B_RGU 1
#endif
#ifndef B_ROLE
#define B_ROLE 1
#endif
#ifndef B_CUT
#define B_CUT 1
#endif
#ifndef B_FO
#define B_FO 1
#endif
#ifndef B_CLOSE
#define B_CLOSE 1
#endif
#ifndef B_LSET
#define B_LSET 1
#endif
#ifndef G1L
#define G1L LEASE         /* G1's lease (SLEASE: an explicit Lease) */
#endif
#ifndef G1ON
#define G1ON 1            /* G1 locks at all */
#endif
#ifndef G0TWO
#define G0TWO 1           /* G0's second Lock (as K1, with a Lease) */
#endif
#ifndef NTRY
#define NTRY 2            /* attempts of a Lock call */
#endif

/* The renew script renews any hold of the field (renew.lua has no
 * token); a new acquisition of the field waits, holding the turn, until
 * no renewal of it is on the wire, given up on or of a tick still in
 * flight (Quiet). */
#ifdef TOKEN
#define RENEW_ANY false
#else
#define RENEW_ANY true
#endif
#ifdef R36
#define QUIET true
#else
#ifdef STRAYONLY
#define QUIET !(wq && wdly)
#else
#define QUIET !wq
#endif
#endif
#ifdef R33
#define LAYOUT_CHECK false
#else
#define LAYOUT_CHECK true
#endif
#ifdef M3
#define M3_ON true
#else
#define M3_ON false
#endif

/* ---------------- kinds as values: the protocol table ---------------- */
#define PLAIN 0
#define READ 1
#define WRITE 2
byte P_lay[3];            /* the hash layout of the kind's scripts (1 plain, 2 mode read, 3 mode write) */
bool P_share[3];          /* holders of this kind share the name */
bool P_add[3];            /* a re-entry adds a lease to the time left (Redisson's writer) */
inline protocols() {
  P_lay[PLAIN] = 1; P_lay[READ] = 2; P_lay[WRITE] = 3;
  P_share[READ] = 1;
#ifdef R311
  P_add[WRITE] = 1;
#endif
}
#define compatible(k, j) (P_share[k] && P_share[j])

/* answers */
#define BUSY 1
#define ACQ 2
#define FEWER 3
#define CANC 4
#define STILL 5
#define RELD 6
#define NOTH 7
/* records (redisson_unlock_latch:{name}:<reqid>) */
#define L0 1              /* a release's latch: still held */
#define L1 2              /* ... released */
#define LF 3              /* a settlement's fence */
/* request operations */
#define OACQ 1
#define OREL 2
#define OSET 3
#define FA 0              /* A's field */
#define FB 1              /* B's field */

/* ---------------- Redis: the current master ---------------- */
byte lay;                 /* 0: no key */
byte cnt[2];              /* holds of each field */
byte kt;                  /* the key's time to live, ticks */
byte tok;                 /* A's field: the acquisition (gen) that created it */
byte rec[NID];            /* A's request records */
/* the replica: what the last acknowledged WAIT brought over */
byte rlay; byte rcnt[2]; byte rkt; byte rtok;
bool cut;                 /* the link to the replica is cut for good */
bool fo;                  /* failed over: the replica is the master */
byte cuts = B_CUT, fos = B_FO;
/* A's requests on the wire: slots (one per connection), any order */
byte mop[NS]; byte mid[NS]; byte mkn[NS]; byte ml[NS]; byte mk[NS]; byte mg[NS];
bool mdly[NS];            /* its sender gave up on it: it may land late */
/* the renewal on the watchdog's connection */
bool wq; byte wg; bool wdly;
bool wstale;              /* the entry it was sent for is gone (entry identity) */
/* the one reply A's turn holder waits for */
byte wid = 255;           /* the id waited for */
bool rready; byte rres; byte rcount;
byte sres;                /* Redis's scratch */
bool wready; bool wres; bool wack;   /* the watchdog's reply, and its WAIT's */
/* fault budgets */
byte lreq = B_LREQ, lrep = B_LREP, dly = B_DLY, rgu = B_RGU, rolel = B_ROLE, lset = B_LSET;

/* ghosts for the properties */
byte akt;                 /* P2: the longest time to live A's current acquisition allows */
bool cleanClosed;         /* P4: Close returned listing nothing */
bool listed;              /* Close's error lists what is left */

/* ---------------- the hold of A: (name, field, kind) ---------------- */
byte hkind = K0;          /* identity: its kind (a new hold after retire) */
byte count;               /* the field's holds in Redis, as far as A knows */
bool inflight;            /* the one count-changing request in flight */
byte uns;                 /* unsettled: 0 none, OACQ or OREL */
byte uid;                 /* ... its id */
byte helds;               /* Helds in the hold: returned and not unlocked, or unconfirmed */
byte hl[2];               /* G0's, G1's Held: 0 none, 1 live (ctx not ended, Unlock not called), 2 ended (lost, closed) */
byte unconf;              /* Helds whose release was lost (Unlock returned; not renewed) */
bool m5;                  /* M5: a release in flight */
byte entry;               /* 0 none, 1 renewed, 2 explicit lease (not renewed) */
byte edl;                 /* the entry's deadline, ticks from now */
byte egen;                /* the acquisition the entry tracks */
byte gen = 1;             /* the next acquisition's token */
bool lost;                /* a loss judged, applied at the next turn */
byte turn;                /* 0 free, else the holder (1 G0, 2 G1, 3 settler, 4 Close) */
byte nrid;                /* scratch: a fresh id */
/* the replica knowledge (lock/replicas.go): had is sticky (New saw one) */
bool rknown = 1; byte rn = 1; bool had = 1;
bool closed;              /* Close began: calls see done */
byte calls;               /* calls in flight (Close waits for them) */
bool closing;             /* Close is past waiting */
bool bheld;               /* B holds */
byte gdone;               /* goroutines of A finished */

#define named(i) ((mop[0] != 0 && mid[0] == i) || (mop[1] != 0 && mid[1] == i) || (uns != 0 && uid == i))
#define quiet (mop[0] == 0 && mop[1] == 0)
#define hlive ((hl[0] == 1) + (hl[1] == 1))
#ifdef M5
#define M5busy m5
#else
#define M5busy false
#endif
inline endAll() { if :: hl[0] == 1 -> hl[0] = 2 :: else fi; if :: hl[1] == 1 -> hl[1] = 2 :: else fi }

/* P3: with nothing unsettled or in flight, A's count is Redis's (on the
 * master A wrote to: a failover may lose what no replica acknowledged). */
inline checkCount() {
  assert(fo || uns != 0 || inflight || !quiet || lost ||
         cnt[FA] <= count && (hlive == 0 || count == cnt[FA]))
}

/* ---------------- Redis scripts (atomic) ---------------- */
inline keyGone() { lay = 0; cnt[FA] = 0; cnt[FB] = 0; kt = 0; akt = 0 }

/* acquire (acquire_counted.lua / acquire_read.lua / acquire_write.lua, as
 * the table has them) for field f, kind k, known n, lease l, token g */
inline acquireScript(f, k, n, l, g, r) {
  if
  :: lay != 0 && lay != P_lay[k] && LAYOUT_CHECK -> r = BUSY                                  /* a hash of another layout */
  :: else ->
     if
     :: cnt[f] == n + 1 ->                        /* this request ran, or a stray adopted */
#ifdef M4
        kt = l;
#else
        if :: kt < l -> kt = l :: else fi;
#endif
        if :: f == FA && n == 0 -> tok = g :: else fi;
        r = ACQ
     :: cnt[f] < n -> r = FEWER
     :: cnt[f] >= n && cnt[f] != n + 1 && (lay == 0 || cnt[f] > 0 || P_share[k]) ->
        if
        :: lay == 0 -> kt = l; lay = P_lay[k]
        :: lay != 0 && cnt[f] > 0 && P_add[k] -> kt = kt + l   /* R3-11: Redisson's writer */
#ifdef M4
        :: lay != 0 && (cnt[f] == 0 || !P_add[k]) -> kt = l
#else
        :: lay != 0 && (cnt[f] == 0 || !P_add[k]) -> if :: kt < l -> kt = l :: else fi
#endif
        fi;
        if :: f == FA && cnt[f] == 0 -> tok = g :: else fi;
        cnt[f]++; r = ACQ
     :: else -> r = BUSY
     fi
  fi
}

/* release for A's field, kind k, request id i; latch written */
inline releaseScript(k, i, r) {
  if
  :: rec[i] == L0 -> r = STILL                    /* answered by its latch */
  :: rec[i] == L1 -> r = RELD
  :: rec[i] == LF -> r = NOTH                     /* fenced: never runs */
  :: rec[i] == 0 && (cnt[FA] == 0 || lay != P_lay[k] && LAYOUT_CHECK) -> r = NOTH
  :: rec[i] == 0 && cnt[FA] > 1 && (lay == P_lay[k] || !LAYOUT_CHECK) -> cnt[FA]--; rec[i] = L0; r = STILL
  :: rec[i] == 0 && cnt[FA] == 1 && (lay == P_lay[k] || !LAYOUT_CHECK) ->
     cnt[FA] = 0; rec[i] = L1; r = RELD;
     if :: cnt[FB] == 0 || !P_share[k] -> keyGone() :: else -> akt = 0 fi
  fi
}

/* settle.lua: fence the request unless it has a record; its count */
inline settleScript(i) {
#ifndef M8
  if :: rec[i] == 0 -> rec[i] = LF :: else fi;
#endif
  skip
}

/* P1 at a grant to B; P2 after A's field's expiry is set */
inline checkGrantB() {
  assert(hlive == 0 || compatible(hkind, KB))
}
inline checkTTL() {
  assert(cnt[FA] == 0 || cnt[FB] > 0 || kt <= akt)
}
inline checkClosed() {
  assert(!cleanClosed || fo || cnt[FA] == 0)
}

/* run A's request in slot s */
inline runSlot(s) {
  if
  :: mop[s] == OACQ ->
     if
     :: rec[mid[s]] != 0 -> sres = CANC
     :: else ->
        acquireScript(FA, mk[s], mkn[s], ml[s], mg[s], sres);
        if
        :: sres == ACQ ->                          /* P2: the lease asked for; B's time left on a shared key */
           if :: akt < ml[s] -> akt = ml[s] :: else fi;
           if :: cnt[FB] > 0 && akt < kt -> akt = kt :: else fi
        :: else
        fi
     fi
  :: mop[s] == OREL -> releaseScript(mk[s], mid[s], sres)
  :: mop[s] == OSET -> settleScript(mid[s]); sres = rec[mid[s]]
  fi;
  
  if
  :: wid == mid[s] && !mdly[s] -> rres = sres; rcount = cnt[FA]; rready = 1   /* the reply, read before time moves */
  :: wid == mid[s] && !mdly[s] && lrep > 0 -> lrep--   /* reply lost */
  :: else                                         /* nobody waits for it */
  fi;
  mop[s] = 0; mdly[s] = 0; sres = 0;
  checkTTL(); checkClosed()
}

proctype Redis() {
end:
  do
  :: atomic { mop[0] != 0 -> runSlot(0) }
  :: atomic { mop[1] != 0 -> runSlot(1) }
  :: atomic { mop[0] != 0 && lreq > 0 -> lreq--; mop[0] = 0; mdly[0] = 0 }   /* request lost */
  :: atomic { mop[1] != 0 && lreq > 0 -> lreq--; mop[1] = 0; mdly[1] = 0 }
  :: atomic { wq ->                               /* renew.lua */
       if
       :: cnt[FA] > 0 && (RENEW_ANY || tok == wg) -> kt = LEASE; wres = 1;
          if :: wg == tok && akt < LEASE -> akt = LEASE :: else fi   /* a renewal of this acquisition */
       :: else -> wres = 0
       fi;
       if                                          /* its WAIT (renewSync): a replica has it */
       :: wres && fo -> wack = 1                   /* the promoted master: none to wait for */
       :: wres && !fo && !cut -> wack = 1;
          if :: fos > 0 -> rlay = lay; rcnt[FA] = cnt[FA]; rcnt[FB] = cnt[FB]; rkt = kt; rtok = tok :: else fi
       :: else -> wack = 0
       fi;
       if :: !wdly -> wready = 1 :: else -> wack = 0 fi;
       wq = 0; wdly = 0;
       checkTTL() }
  :: atomic { cuts > 0 && !cut -> cuts--; cut = 1 }
  :: atomic { fos > 0 && !bheld -> fos = 0; fo = 1;  /* kill the master, promote the replica */
       lay = rlay; cnt[FA] = rcnt[FA]; cnt[FB] = rcnt[FB]; kt = rkt; tok = rtok;
       if :: cnt[FA] == 0 -> akt = 0 :: else -> akt = kt fi;   /* P2 is about the master's own writes */
       if :: lay == 0 -> keyGone() :: else fi }
  od
}

/* WAIT 1 after a write: acknowledged while the link is up (the replica
 * gets everything so far); no WAIT after a failover (the promoted master
 * has none and was never seen with one) */
inline sync(W) {
  if
  :: fo -> W = 0
  :: else ->
     if
     :: skip                                      /* the count is fresh */
     :: rknown = 1; if :: cut -> rn = 0 :: rn = 1 fi   /* ROLE answered */
     :: rolel > 0 -> rolel--; rknown = 0          /* ROLE asked; its reply lost */
     fi;
#ifdef R31
     W = (rknown && (rn > 0 || had))              /* a lost answer: none to wait for */
#else
     W = !(rknown && rn == 0 && !had)
#endif
  fi
}
inline wait(W, ack) {
  atomic {
    if
    :: W && !cut && !fo && fos > 0 -> rlay = lay; rcnt[FA] = cnt[FA]; rcnt[FB] = cnt[FB]; rkt = kt; rtok = tok; ack = 1
    :: W && !cut && !fo && fos == 0 -> ack = 1     /* no failover to come: the replica's copy is not kept */
    :: else -> ack = 0
    fi
  }
}

/* ---------------- the clock ---------------- */
#define dec(x) if :: x > 0 -> x-- :: else fi
proctype Clock() {
end:
  do
  :: atomic {
       (mop[0] == 0 || mdly[0]) && (mop[1] == 0 || mdly[1]) &&   /* a request runs in its tick, unless late */
       (!wq || wdly) && !rready && !wready && !bheld && turn == 0 &&   /* a turn's steps take less than a tick */
       !(entry != 0 && edl <= MARGIN && !lost && !M5busy) &&     /* the judge comes first */
       !(entry == 1 && edl + RI <= LEASE && !wq && !M5busy && hlive + unconf > 0) &&   /* a due renewal is sent first */
       (kt > 0 || rkt > 0 || entry != 0) ->
       dec(edl); dec(akt); dec(rkt);
       if
       :: kt == 1 ->                               /* the key expires */
          assert(cnt[FA] == 0 || hlive == 0);      /* P1: the loss was signalled */
          keyGone()
       :: else -> dec(kt)
       fi;
       if :: rkt == 0 -> rlay = 0; rcnt[FA] = 0; rcnt[FB] = 0 :: else fi
     }
  od
}

/* ---------------- the hold's events (each holding the turn) ---------------- */
inline newId() {
  if
  :: !named(0) -> nrid = 0
  :: !named(1) && named(0) -> nrid = 1
  :: !named(2) && named(0) && named(1) -> nrid = 2
  fi;
  rec[nrid] = 0
}
inline post(op, i, n, l, k, g) {
  atomic {
    if
    :: mop[0] == 0 -> mop[0] = op; mid[0] = i; mkn[0] = n; ml[0] = l; mk[0] = k; mg[0] = g; mdly[0] = 0
    :: mop[1] == 0 && mop[0] != 0 -> mop[1] = op; mid[1] = i; mkn[1] = n; ml[1] = l; mk[1] = k; mg[1] = g; mdly[1] = 0
    fi;
    wid = i; rready = 0
  }
}
/* wait for the reply to id i: got = 1 with rres/rcount, or 0: given up
 * (nothing can come: a lost request or reply; or the sender's ctx ended,
 * or Close began, while the request may still be on the wire) */
inline await(i, got) {
  atomic {
    if
    :: rready -> got = 1
    :: !rready && !(mop[0] != 0 && mid[0] == i) && !(mop[1] != 0 && mid[1] == i) -> got = 0
    :: !rready && dly > 0 && ((mop[0] != 0 && mid[0] == i) || (mop[1] != 0 && mid[1] == i)) ->
       dly--; got = 0;
       if :: mop[0] != 0 && mid[0] == i -> mdly[0] = 1 :: else -> mdly[1] = 1 fi
    :: !rready && closed && ((mop[0] != 0 && mid[0] == i) || (mop[1] != 0 && mid[1] == i)) ->
       got = 0;
       if :: mop[0] != 0 && mid[0] == i -> mdly[0] = 1 :: else -> mdly[1] = 1 fi
    fi;
    rready = 0; wid = 255
  }
}

inline acquireSent(i, n, l, g) { inflight = 1; post(OACQ, i, n, l, hkind, g) }
inline acquireLost(i) { inflight = 0; uns = OACQ; uid = i }
inline releaseSent(i) { inflight = 1; post(OREL, i, 0, 0, hkind, 0) }
inline releaseLost(i) { inflight = 0; uns = OREL; uid = i }

/* acquireAnswered(granted): the count is Redis's; the entry tracks the
 * hold (a new entry for a first hold, the same one for a re-entry); the
 * Held is made live once returned (see lock) */
inline granted(l, g) {
  inflight = 0; count = rcount;
  checkCount()
}
/* the Held is returned: the entry tracks it (a new entry for a first
 * hold, the same one for a re-entry) */
inline born(l, g) {
  helds++;
  if
  :: entry == 0 -> egen = g; edl = l; entry = (l == LEASE -> 1 : 2)
  :: entry != 0 -> if :: edl < l -> edl = l :: else fi; if :: l == LEASE -> entry = 1 :: else fi
  fi
}
/* acquireAnswered(fewer): holds were lost; their Helds are told */
inline fewer() { inflight = 0; count = rcount; endAll() }
/* settled(out): the unsettled request's outcome is known */
inline settled(out, c) {
  if
  :: uns == OREL && unconf > 0 ->                  /* the unconfirmed Held ends (ran: plainly; fenced: a loss) */
     unconf--; helds--
  :: else
  fi;
  uns = 0; count = c;
  if :: count < hlive -> endAll() :: else fi;     /* fewer holds than Helds: a loss */
  checkCount()
}
/* releaseAnswered(res): one hold fewer */
inline releaseAnswered(r) {
  inflight = 0;
  if
  :: r == STILL -> count = (count > 1 -> count - 1 : 1)
  :: r == RELD -> count = 0
  :: r == NOTH -> count = 0; endAll()              /* not held: a loss */
  fi
}
/* renewalAnswered / renewalFailed: the watchdog's, applied to the entry
 * it was sent for */
inline renewalAnswered() { if :: entry != 0 && !wstale -> edl = LEASE :: else fi }
inline renewalFailed() { skip }
/* lossJudged: the Helds' contexts end at once; count and entry at the
 * next turn */
inline lossJudged() { endAll(); lost = 1 }
inline applyLost() {
  if :: lost -> lost = 0; entry = 0; wstale = (wq || wready); helds = helds - unconf; unconf = 0 :: else fi
}
/* with no Held left, the entry goes */
inline dropEntry() { if :: helds == 0 -> entry = 0; wstale = (wq || wready) :: else fi }

inline takeTurn(who) { atomic { turn == 0 -> turn = who; applyLost(); assert(helds < 4 && count < 5 && calls < 4 && unconf < 3) } }
inline giveTurn() { turn = 0 }

/* settle: the settlement of the unsettled request; ok = answered */
inline settle(ok) {
  ok = 0;
  if
  :: lset > 0 -> lset--                            /* its answer lost: still unsettled */
  :: atomic { settleScript(uid); ok = 1; settled(rec[uid], cnt[FA]) }
  fi
}

/* release strays (holds nobody has) with the hold's own kind; a lost
 * answer leaves the release unsettled */
inline releaseStrays(ok) {
  do
  :: helds == 0 && count > 0 && !inflight && (uns == 0 || M3_ON) ->
     newId(); myid = nrid;
     releaseSent(myid);
     await(myid, ok);
     if
     :: ok -> releaseAnswered(rres)
     :: else -> releaseLost(myid); break
     fi
  :: else -> break
  od;
  dropEntry()
}

/* givenBack: a grant that cannot be used (no replica acknowledged it, or
 * Close began) is released at once; its Held was never returned */
inline giveBack(ok) {
  newId(); myid = nrid;
#ifdef M1
  giveTurn();                                     /* sent without the turn; the caller retries at once */
#endif
  releaseSent(myid);
  await(myid, ok);
  if
  :: ok -> releaseAnswered(rres)
  :: else -> releaseLost(myid)
  fi;
  dropEntry()
}

/* retire: the old kind's hold is made empty with its own scripts, then
 * dropped, and one of the new kind made; ok = 0: something is left (the
 * attempt fails, ErrUnavailable) */
inline retire(k, ok) {
  ok = 1;
  if :: uns != 0 -> settle(ok) :: else fi;
  if :: ok -> releaseStrays(ok) :: else fi;
  if
  :: uns == 0 && count == 0 && !inflight -> ok = 1; hkind = k
  :: else -> ok = 0
  fi
}

#define inflight_named(i) ((mop[0] != 0 && mid[0] == i) || (mop[1] != 0 && mid[1] == i))

/* Lock(k, l) by goroutine g: NTRY attempts; hl[g] = 1: a Held */
inline lock(g, k, l) {
  tries = 0; calls++;
  do
  :: tries == NTRY || closed -> break
  :: tries < NTRY && !closed ->
     tries++;
     takeTurn(g + 1);
     if :: closed -> giveTurn(); break :: else fi;
     if
     :: hkind != k ->
        if :: helds > 0 -> giveTurn(); break :: else fi;   /* ErrInvalid */
#ifdef R33
        hkind = k; ok = 1;                         /* no retire: the kind switched */
#else
        retire(k, ok);
#endif
        if :: !ok -> giveTurn(); goto nexttry :: else fi
     :: else
     fi;
     if :: uns != 0 -> settle(ok); if :: !ok -> giveTurn(); goto nexttry :: else fi :: else fi;
     /* known: with no Held, strays beyond one are released, one adopted */
     if
     :: helds > 0 || count == 0 -> kn = count
     :: else ->
        if :: count > 1 -> releaseStrays(ok) :: else fi;
        if
        :: count == 1 && uns == 0 && !inflight -> kn = 0
        :: else -> giveTurn(); goto nexttry
        fi
     fi;
     if :: helds == 0 && kn == 0 -> (QUIET); gen = gen % 4 + 1 :: else fi;   /* Quiet: before a new acquisition */
     sync(W);
     newId(); myid = nrid; sends = 1;
     acquireSent(myid, kn, l, gen);
again:
     await(myid, ok);
#ifndef M7
     if                                            /* answered after a resend: an earlier copy may */
     :: ok && sends > 1 -> uns = OACQ; uid = myid; settle(ok2)   /* still run: settled (fenced) at once */
     :: else
     fi;
#endif
     if
     :: !ok && sends == 1 && !closed ->            /* sent again, same id (a copy may still be on the wire) */
        sends = 2; post(OACQ, myid, kn, l, hkind, gen); goto again
     :: !ok -> acquireLost(myid); giveTurn(); goto nexttry
     :: ok && rres == ACQ ->
        granted(l, gen);
        wait(W, ack);
        atomic {                                   /* the Held is born, or the grant is unusable */
          if
          :: W && !ack || closed || lost -> isborn = 0   /* unsynced, closed, or late (judged meanwhile) */
          :: else -> isborn = 1; hl[g] = 1; born(l, gen);
             assert(!bheld || compatible(hkind, KB))   /* P1 at A's grant */
          fi
        };
        if
        :: !isborn -> giveBack(ok)
#ifdef M1
           ; goto nexttry
#endif
        :: else
        fi;
        giveTurn();
        if :: isborn -> break :: else -> goto nexttry fi
     :: ok && rres == FEWER -> fewer(); giveTurn()
     :: ok && (rres == BUSY || rres == CANC) -> inflight = 0; giveTurn()
     fi;
nexttry:
     skip
  od;
  calls--
}

/* Unlock of goroutine g's Held: the owner leaves its critical section;
 * the release holds the turn across its resend */
inline unlock(g) {
  calls++;
  takeTurn(g + 1);
  if
  :: hl[g] != 1 || closing ->                      /* ended (lost, closed): nothing to send */
     if :: hl[g] == 2 && !closing -> helds--; dropEntry() :: else fi;
     hl[g] = 0
  :: else ->
     hl[g] = 0;
     sync(W);
     newId(); myid = nrid; sends = 1;
#ifdef M5
     m5 = 1;
#endif
     releaseSent(myid);
again2:
     await(myid, ok);
     if
     :: !ok && sends == 1 && !closed && !inflight_named(myid) -> sends = 2; post(OREL, myid, 0, 0, hkind, 0); goto again2
     :: !ok -> releaseLost(myid); unconf++;        /* the Held unconfirmed, not renewed */
        if :: entry == 1 -> entry = 2 :: else fi
     :: ok -> releaseAnswered(rres); wait(W, ack); helds--;
        if :: helds == 0 && count > 0 -> releaseStrays(ok) :: else fi;
        dropEntry()
     fi;
#ifdef M5
     m5 = 0;
#endif
     checkCount()
  fi;
  giveTurn();
  calls--
}

/* ---------------- the goroutines ---------------- */
#define LOCALS bool ok, ok2, ack, W, isborn; byte tries, kn, myid, sends

proctype G0() {
  LOCALS;
  lock(0, K0, LEASE);
  if :: hl[0] != 0 -> unlock(0) :: else fi;
#if G0TWO
  lock(0, K1, SLEASE);
  if :: hl[0] != 0 -> unlock(0) :: else fi;
#endif
  gdone++
}

proctype G1() {
  LOCALS;
#if G1ON
  lock(1, K0, G1L);
  if :: hl[1] != 0 -> unlock(1) :: else fi;
#endif
  gdone++
}

/* the settler (one per Client): settles whenever the turn is free, then
 * releases strays if no Held is in the hold */
proctype Settler() {
  LOCALS;
end:
  do
  :: atomic { turn == 0 && uns != 0 && !closed -> turn = 3; applyLost() };
     settle(ok);
     if :: ok -> releaseStrays(ok) :: else fi;
     giveTurn()
  :: gdone == 3 -> break
  od
}

/* the watchdog: renewals of the entry (one round trip at a time, which
 * it may give up on: the renewal then lands late), loss judging */
proctype Watchdog() {
  bool ack;
end:
  do
  :: atomic { entry == 1 && edl + RI <= LEASE && !wq && !M5busy && hlive + unconf > 0 ->
       wq = 1; wg = egen; wdly = 0; wready = 0; wstale = 0 }
  :: atomic { wready -> wready = 0;
       if
       :: wres && wack -> renewalAnswered()       /* a replica acknowledged it */
       :: wres && !wack -> renewalFailed()
       :: !wres && entry != 0 && !wstale -> lossJudged()           /* answered 0 */
       :: !wres && !(entry != 0 && !wstale) -> skip
       fi;
       wstale = 0; wack = 0 }
  :: atomic { wq && !wdly && rgu > 0 -> rgu--; wdly = 1; renewalFailed() }   /* given up on */
  :: atomic { entry != 0 && edl <= MARGIN && !lost && !M5busy -> lossJudged() }
  :: gdone == 3 -> break
  od
}

/* Close(ctx): calls in flight see done and return (they give up on
 * their requests: these are unsettled); Close waits for them, ends the
 * Helds (ErrClosed), settles what is unsettled, releases what is left
 * with the hold's kind, and lists in its error what it could not */
proctype Closer() {
  LOCALS;
  if
  :: B_CLOSE -> closed = 1
  :: true -> goto out
  fi;
#ifdef CLOSE_NOP
  closing = 1; cleanClosed = 1;
#else
  (calls == 0);
  closing = 1;
  takeTurn(4);
#ifndef CLOSE_LATE
  endAll();                                        /* cancel first */
#endif
  if :: uns != 0 -> settle(ok) :: else fi;
  do
  :: uns == 0 && count > 0 ->
     sync(W);
     newId(); myid = nrid;
     releaseSent(myid);
     await(myid, ok);
     if
     :: ok -> releaseAnswered(rres); wait(W, ack);
        if :: W && !ack -> listed = 1 :: else fi   /* no replica has the release */
     :: else -> releaseLost(myid); break
     fi
  :: else -> break
  od;
#ifdef CLOSE_LATE
  endAll();
#endif
  listed = listed || uns != 0 || count > 0;
  helds = 0; unconf = 0; entry = 0; wstale = (wq || wready); hl[0] = 0; hl[1] = 0;
  giveTurn();
  cleanClosed = !listed;
#endif
  checkClosed();
out:
  gdone++
}

/* B: another Client locks the name as KB, holds, unlocks */
proctype B() {
  byte j, r;
  do
  :: j == NTRY -> break
  :: j < NTRY ->
     j++;
     atomic {
       acquireScript(FB, KB, 0, LEASE, 0, r);
       if :: r == ACQ -> bheld = 1; checkGrantB(); if :: cnt[FA] > 0 && akt < kt -> akt = kt :: else fi :: else fi;
       checkTTL()
     };
     if
     :: bheld ->
        atomic {
          bheld = 0;
          if
          :: cnt[FB] == 1 && (cnt[FA] == 0 || !P_share[KB]) -> keyGone()
          :: cnt[FB] == 1 && cnt[FA] > 0 && P_share[KB] -> cnt[FB] = 0
          :: cnt[FB] != 1 -> skip                  /* gone: expired or failed over */
          fi;
          checkClosed()
        };
        break
     :: else
     fi
  od
}

init {
  atomic {
    protocols();                                   /* the kinds' table, before anything runs */
    run Redis(); run Clock(); run G0(); run G1(); run Settler(); run Watchdog(); run Closer(); run B()
  }
}
