/*
 * rlock: the lock protocol as the code implements it (lock/ledger.go,
 * lock/mutex.go, lock/held.go, reentrant/*.lua), one lock name on one
 * Redis master. Checked with spin; see README.md.
 *
 *   clients: A (index 0, field 1) with goroutines G0 and G1 sharing one
 *            owner (one ledger); B (index 1, field 2) with goroutine G2;
 *            each client has a settler (settleLater) of its own.
 *   G0: Lock; Lock(Lease SLEASE) (re-entry); Unlock; Unlock
 *   G1: Lock; Unlock; Lock; Unlock          G2: Lock; Unlock; Lock; Unlock
 *
 * Switches (all off = the code):
 *   EXCL_ONLY  only mutual exclusion and timely loss signals (for trails)
 *   PLAINT     the trail clock T is an ordinary variable (pan -DBFS)
 *   M1    undo not ordered after its acquire (sent on another connection
 *         without the turn; the caller retries at once)        [db82bdb]
 *   M2    the turn is let go between release retries, so an acquire can
 *         slip in before a latched answer is applied          [db82bdb]
 *   M3    releases run without the turn and release "extra" counts when
 *         no other local Held is registered (no in-flight check) [db82bdb]
 *   M4    a re-entry PEXPIREs its own lease instead of max(PTTL, lease)
 *   M5    an entry with a release in flight is neither renewed nor judged
 *   M6    Unlock retries its release for as long as its Held lives, past
 *         the life of the release's latch                    [5225b73]
 *   M7    an acquire answered after it was sent again is not fenced: a
 *         delayed copy may still run later                   [5225b73]
 *   M8    the settlement only reads the count, without fencing the
 *         request it settles
 *   LIVE  the liveness configuration (no time, only pub/sub faults)
 *   NOTIMER  (with LIVE) a waiter wakes on messages only: must fail
 *   WITNESS  asserts that a run with every fault kind is NOT possible, so
 *         that spin prints one (the bounds are reachable together)
 */

#ifndef LEASE
#define LEASE   5       /* watchdog lease, ticks */
#endif
#ifndef SLEASE
#define SLEASE  2       /* explicit Lease of G0's re-entry (M4 is checked with RI=3 > SLEASE) */
#endif
#ifndef DRIFT
#define DRIFT   1       /* |client clock - server clock| over one lease */
#endif
#ifndef MARGIN
#define MARGIN  (DRIFT+1) /* lease*drift + one round trip */
#endif
#ifndef RI
#define RI      1       /* renewal interval: a renewal is sent RI after the last good one */
#endif
#ifndef CT
#define CT      0       /* a request runs within CT ticks of its send, or never (CommandTimeout) */
#endif
#ifndef LTTL
#define LTTL    8       /* record TTL: unlock latch and settlement fence (ticks) */
#endif
/* Time is relative: the clock never changes `now' (NOW0); a tick moves
   every stored time stamp one step into the past instead (saturating at 0,
   which NOW0 >= every look-back makes exact). States that differ only by
   a shift of time are then one state, and the search needs no horizon. */
#define NOW0    LTTL
/* request ids: IDS per goroutine and per settler (5 owners of ids) */
#define IDS     3       /* the current one, and ones a delayed copy or an unsettled request still names */
#define NR      (5*IDS)

/* fault budgets (per run) */
#ifdef LIVE
#define B_LREQ 0
#define B_LREP 0
#define B_RST  0
#define B_DREQ 0
#else
#ifndef B_LREQ
#define B_LREQ 1
#endif
#ifndef B_LREP
#define B_LREP 1
#endif
#ifndef B_RST
#define B_RST  1
#endif
#ifndef B_DREQ
#define B_DREQ 0        /* a request delayed past its timeout (runs after the client gave up on it) */
#endif
#endif
#if defined(M1) || defined(M3)
#undef B_DREQ
#define B_DREQ 0        /* conn 1 is theirs */
#endif
#ifndef B_LATE
#ifdef LIVE
#define B_LATE 0
#else
#define B_LATE 1
#endif
#endif
#ifdef LIVE
#define B_PLOSS 1
#define B_PRST  1
#else
#define B_PLOSS 0       /* pub/sub matters for liveness only: safety runs wake waiters at any time */
#define B_PRST  0
#endif

/* message types */
mtype = { ACQUIRE, RELEASE, UNDO, RENEW, SETTLE, ACQUIRED, ALREADY_RAN, FEWER, BUSY, CANCELLED, STILL_HELD, RELEASED, NOT_HELD, UNDO_ANSWER, RENEWED, RENEW_0, FENCED };
#define T_ACQ    ACQUIRE
#define T_REL    RELEASE
#define T_UNDO   UNDO       /* M1 only: db82bdb's compensation */
#define T_REN    RENEW
#define T_SET    SETTLE
/* message states */
#define S_NONE  0
#define S_REQ   1
#define S_REP   2
/* replies */
#define R_ACQ    ACQUIRED   /* acquired by this run */
#define R_RAN    ALREADY_RAN   /* count == known+1: this request ran before (or a stray adopted) */
#define R_MIS    FEWER      /* fewer holds than known */
#define R_BUSY   BUSY
#define R_CANC   CANCELLED  /* the request's record exists (fenced) */
#define R_STILL  STILL_HELD
#define R_REL    RELEASED
#define R_NOTH   NOT_HELD
#define R_UNDO   UNDO_ANSWER
#define R_RENEW  RENEWED
#define R_RENEW0 RENEW_0
#define R_FENCED FENCED     /* settle: the request had not run as a release; it never will */
/* record values (redisson_unlock_latch:{name}:<reqid>) */
#define L_0     1    /* release latch "0" */
#define L_1     2    /* release latch "1" */
#define L_F     3    /* the settlement's fence "2" */

/* ---------------- Redis ---------------- */
byte now = NOW0;          /* server time (constant: see NOW0) */
#ifdef PLAINT
byte T;                   /* (pan -DBFS refuses hidden variables) */
#else
hidden byte T;            /* absolute time, for the printed trail only (not in the state) */
#endif
byte gsent[3];            /* first send of the goroutine's current request */
byte gt0[3];              /* start of a back-off */
byte rf;                  /* field holding the key: 0 none, c+1 */
byte rc;                  /* its count */
byte rexp;                /* absolute expiry */
byte lv[NR];              /* records (redisson_unlock_latch:{name}:<reqid>) */
byte lt[NR];              /* when set */
bit  pub;                 /* an unlock message in flight to subscribers */

/* ---------------- network: per client, slot 0 count ops, 1 a delayed copy (or M1's undo, M3's
   releases), 2 renewals */
byte mt[6], mr[6], mn[6], ml[6], ms[6], mst[6], mv[6], mc[6];
byte mg[6];               /* renewal: the entry it was sent for (0: that entry is gone) */
bit  mdel[6];             /* a reply delayed past ticks (fault) */
byte lreq = B_LREQ, lrep = B_LREP, rst = B_RST, ploss = B_PLOSS, prst = B_PRST, dlate = B_LATE, dreq = B_DREQ;

/* ---------------- clients ---------------- */
byte turn[2];             /* 0 free, else g+1 (settlers: 4, 5) */
#ifdef M3
byte rturn[2];
#endif
byte cnt[2];              /* the ledger's count */
byte live[2];             /* live Helds */
byte nls[2];              /* live Helds not renewed (taken with Lease, or their release unconfirmed) */
byte uns[2];              /* the unsettled request: its id + 1 (0: none) */
byte ugh[2];              /* its Held: the goroutine + 1 of an unconfirmed release (0: none) */
bit  went[2];             /* watchdog entry exists */
byte wgen[2] = 1;         /* the entry's generation (1 or 2) */
byte dl[2];               /* ledger deadline */
byte relfl[2];            /* releases in flight */
bit  lastrel[2];          /* the release in flight is the last (count 1) */
byte busyop[2];           /* ghost: count-changing commands of the field in flight */
byte relop[2];            /* ghost: Unlocks between their first send and their outcome */
bit  wake[2];
byte nwait[2];
byte gh[3];               /* live Helds per goroutine */
bit  gcs[3];              /* goroutine in its critical section */
bit  glh[3];              /* goroutine holds a Held that is not renewed */
byte fin;

#ifdef WITNESS
byte pb[6];               /* slots of the same client whose requests were in flight at this send */
bit reordered; bit expired;
#endif

#define RC(c)      (rf == (c)+1 -> rc : 0)
#define OTHERCS(c) ((c) == 0 -> gcs[2] : (gcs[0] || gcs[1]))
#define SLOT(c,k)  ((c)*3+(k))
#define MAX(a,b)   ((a) > (b) -> (a) : (b))
/* an id still named: by a delayed copy in flight, or by the unsettled request */
#define NAMED(c,q) ((mst[SLOT(c,1)] == S_REQ && mr[SLOT(c,1)] == (q)) || uns[c] == (q)+1)

#ifdef M5
#define JUDGEABLE(c) (relfl[c] == 0)
#define SUSPENDED(c) (relfl[c] > 0)
#else
#define JUDGEABLE(c) 1
#define SUSPENDED(c) (relfl[c] > 0 && lastrel[c])
#endif

/* The count property. When no count-changing command of the field is in
   flight and nothing is unsettled: Redis counts exactly the ledger's count,
   which is at least the live Helds (the excess: strays the ledger knows of,
   released when its last Held goes); with no live Held, Redis counts at
   most the ledger's count (holds of a lost ledger, waiting to expire or to
   be adopted). So Redis never counts a hold the client does not know of. */
#define COUNT_OK(c) (turn[c] != 0 || relop[c] > 0 || busyop[c] > 0 || uns[c] != 0 || \
                     (live[c] > 0 -> (RC(c) == cnt[c] && cnt[c] >= live[c]) : RC(c) <= cnt[c]))

inline check_counts() {
  skip;
#ifndef EXCL_ONLY         /* EXCL_ONLY: only mutual exclusion and timely loss signals */
  assert(COUNT_OK(0));
  assert(COUNT_OK(1));
#endif
#ifdef WITNESS
  /* claims that no run has a lost request, a lost reply, a reordering and
     a lease expiry: spin refutes it with such a run */
  assert(!(lreq == 0 && lrep == 0 && reordered && expired))
#endif
}

inline publish() {
#ifdef LIVE
  pub = 1
#else
  skip      /* safety runs: waiters re-attempt once the key is free anyway */
#endif
}

/* release one hold of field c+1 (script part shared by release and undo) */
inline release_one(c) {
  rc--;
  if
  :: rc > 0 -> rexp = MAX(rexp, now + LEASE)
  :: else -> rf = 0; rexp = 0; publish()
  fi
}

#ifdef WITNESS
#define REQMASK(c) ((mst[SLOT(c,0)] == S_REQ -> 1 : 0) | (mst[SLOT(c,1)] == S_REQ -> 2 : 0) | (mst[SLOT(c,2)] == S_REQ -> 4 : 0))
inline left_req(s) {
  pb[(s/3)*3] = pb[(s/3)*3] & ~(1 << (s%3));
  pb[(s/3)*3+1] = pb[(s/3)*3+1] & ~(1 << (s%3));
  pb[(s/3)*3+2] = pb[(s/3)*3+2] & ~(1 << (s%3));
  pb[s] = 0
}
#endif

#ifdef M3
#define BGSLOT(s) 0
#else
#define BGSLOT(s) ((s) % 3 == 1)   /* nobody awaits: a delayed copy, or M1's undo */
#endif

/* the scripts, atomic on the server */
inline exec(s) {
  c = s / 3;
  x = RC(c);
  r = mr[s];
  if
  :: mt[s] == T_ACQ ->      /* reentrant/acquire_counted.lua */
     if
     :: lv[r] != 0 -> mv[s] = R_CANC
     :: else ->
        if
        :: x == mn[s] + 1 -> rexp = MAX(rexp, now + ml[s]); mv[s] = R_RAN; mc[s] = x
        :: x < mn[s] -> mv[s] = R_MIS; mc[s] = x
        :: x != mn[s] + 1 && x >= mn[s] && rf == 0 ->
           rf = c+1; rc = 1; rexp = MAX(rexp, now + ml[s]); mv[s] = R_ACQ; mc[s] = 1
        :: x != mn[s] + 1 && x >= mn[s] && rf == c+1 -> rc++;
#ifdef M4
           rexp = now + ml[s];
#else
           rexp = MAX(rexp, now + ml[s]);
#endif
           mv[s] = R_ACQ; mc[s] = rc
        :: x >= mn[s] && rf != 0 && rf != c+1 -> mv[s] = R_BUSY; mc[s] = 0
        fi
     fi
  :: mt[s] == T_REL ->      /* reentrant/release.lua */
     if
     :: lv[r] == L_0 -> mv[s] = R_STILL
     :: lv[r] == L_1 -> mv[s] = R_REL
     :: lv[r] == L_F -> mv[s] = R_FENCED
     :: lv[r] == 0 ->
        if
        :: rf != c+1 -> mv[s] = R_NOTH
        :: else ->
           release_one(c);
           if
           :: rf == c+1 -> mv[s] = R_STILL; lv[r] = L_0
           :: else -> mv[s] = R_REL; lv[r] = L_1
           fi;
           lt[r] = now
        fi
     fi
  :: mt[s] == T_SET ->      /* reentrant/settle.lua: fence, then read */
     if
     :: lv[r] == L_0 -> mv[s] = R_STILL
     :: lv[r] == L_1 -> mv[s] = R_REL
     :: lv[r] == L_F -> mv[s] = R_FENCED
     :: lv[r] == 0 -> mv[s] = R_FENCED;
#ifndef M8
        lv[r] = L_F; lt[r] = now
#endif
     fi;
     mc[s] = x
#ifdef M1
  :: mt[s] == T_UNDO ->     /* db82bdb: a release of one hold, if the field holds */
     if
     :: rf == c+1 -> release_one(c)
     :: else -> skip
     fi;
     mv[s] = R_UNDO
#endif
  :: mt[s] == T_REN ->
     if
     :: rf == c+1 ->
        /* no renewal of a hold nobody holds: the entry that sent it is
           gone, or someone holds, or a count op is in flight */
        assert(!went[c] || mg[s] != wgen[c] || live[c] > 0 || busyop[c] > 0 || turn[c] != 0 || relop[c] > 0);
        rexp = now + LEASE; mv[s] = R_RENEW
     :: else -> mv[s] = R_RENEW0
     fi
  fi;
  if
  :: BGSLOT(s) -> busyop[c]--     /* nobody awaits it */
  :: else -> skip
  fi;
#ifdef WITNESS
  /* a command runs before one sent earlier on another connection */
  if :: pb[s] != 0 -> reordered = 1 :: else -> skip fi;
  left_req(s);
#endif
  mst[s] = S_REP;
  printf("T=%d Redis runs %e of client %d (req=%d): reply %e count=%d; key field=%d count=%d expires=%d\n", T, mt[s], c, r, mv[s], mc[s], rf, rc, rexp);
  if
  :: BGSLOT(s) -> clear_slot(s)   /* its answer is not read */
  :: else -> skip
  fi
}

/* an empty slot keeps no stale fields (fewer distinct states) */
inline clear_slot(s) {
  mst[s] = S_NONE; mt[s] = 0; mr[s] = 0; mn[s] = 0; ml[s] = 0; ms[s] = 0; mv[s] = 0; mc[s] = 0; mg[s] = 0; mdel[s] = 0
}

inline lose_msg(s) {
#ifdef WITNESS
  if :: mst[s] == S_REQ -> left_req(s) :: else -> skip fi;
#endif
  if
  :: mst[s] == S_REQ && BGSLOT(s) -> busyop[s/3]--
  :: else -> skip
  fi;
  clear_slot(s)
}

/* a request delayed past its timeout: its sender sees no answer and goes
   on, and the request runs later, after what the sender does next */
inline delay_req(s) {
  mt[s+1] = mt[s]; mr[s+1] = mr[s]; mn[s+1] = mn[s]; ml[s+1] = ml[s]; ms[s+1] = ms[s]; mst[s+1] = S_REQ;
#ifdef WITNESS
  pb[s+1] = pb[s]; pb[s] = 0;
#endif
  busyop[s/3]++;            /* the copy is a command of the field in flight */
  clear_slot(s)
}

active proctype Redis()
{
  byte s, c, x, r;
end:
  do
  :: d_step { mst[0] == S_REQ -> s = 0; exec(s); check_counts(); s = 0; c = 0; x = 0; r = 0 }
  :: d_step { mst[1] == S_REQ -> s = 1; exec(s); check_counts(); s = 0; c = 0; x = 0; r = 0 }
  :: d_step { mst[2] == S_REQ -> s = 2; exec(s); check_counts(); s = 0; c = 0; x = 0; r = 0 }
  :: d_step { mst[3] == S_REQ -> s = 3; exec(s); check_counts(); s = 0; c = 0; x = 0; r = 0 }
  :: d_step { mst[4] == S_REQ -> s = 4; exec(s); check_counts(); s = 0; c = 0; x = 0; r = 0 }
  :: d_step { mst[5] == S_REQ -> s = 5; exec(s); check_counts(); s = 0; c = 0; x = 0; r = 0 }
  /* faults: a lost request, a lost reply, a connection reset (all of a client's messages) */
  :: atomic { lreq > 0 && mst[0] == S_REQ -> printf("T=%d FAULT request lost\n", T); lose_msg(0); lreq-- }
#if defined(M1) || defined(M3)
  :: atomic { lreq > 0 && mst[1] == S_REQ -> printf("T=%d FAULT request lost (conn 1)\n", T); lose_msg(1); lreq-- }
#endif
  :: atomic { lreq > 0 && mst[2] == S_REQ -> printf("T=%d FAULT request lost (conn 2)\n", T); lose_msg(2); lreq-- }
  :: atomic { lreq > 0 && mst[3] == S_REQ -> printf("T=%d FAULT request lost (conn 3)\n", T); lose_msg(3); lreq-- }
#if defined(M1) || defined(M3)
  :: atomic { lreq > 0 && mst[4] == S_REQ -> printf("T=%d FAULT request lost (conn 4)\n", T); lose_msg(4); lreq-- }
#endif
  :: atomic { lreq > 0 && mst[5] == S_REQ -> printf("T=%d FAULT request lost (conn 5)\n", T); lose_msg(5); lreq-- }
  :: atomic { lrep > 0 && mst[0] == S_REP -> printf("T=%d FAULT reply lost (conn 0)\n", T); clear_slot(0); lrep-- }
#ifdef M3
  :: atomic { lrep > 0 && mst[1] == S_REP -> printf("T=%d FAULT reply lost (conn 1)\n", T); clear_slot(1); lrep-- }
#endif
  :: atomic { lrep > 0 && mst[2] == S_REP -> printf("T=%d FAULT reply lost (conn 2)\n", T); clear_slot(2); lrep-- }
  :: atomic { lrep > 0 && mst[3] == S_REP -> printf("T=%d FAULT reply lost (conn 3)\n", T); clear_slot(3); lrep-- }
#ifdef M3
  :: atomic { lrep > 0 && mst[4] == S_REP -> printf("T=%d FAULT reply lost (conn 4)\n", T); clear_slot(4); lrep-- }
#endif
  :: atomic { lrep > 0 && mst[5] == S_REP -> printf("T=%d FAULT reply lost (conn 5)\n", T); clear_slot(5); lrep-- }
  :: atomic { dlate > 0 && mst[0] == S_REP && !mdel[0] -> printf("T=%d FAULT reply delayed (conn 0)\n", T); mdel[0] = 1; dlate-- }
  :: atomic { dlate > 0 && mst[3] == S_REP && !mdel[3] -> printf("T=%d FAULT reply delayed (conn 3)\n", T); mdel[3] = 1; dlate-- }
#if !defined(M1) && !defined(M3)
  :: atomic { dreq > 0 && mst[0] == S_REQ && mst[1] == S_NONE ->
       printf("T=%d FAULT request delayed past its timeout (client 0)\n", T); delay_req(0); dreq-- }
  :: atomic { dreq > 0 && mst[3] == S_REQ && mst[4] == S_NONE ->
       printf("T=%d FAULT request delayed past its timeout (client 1)\n", T); delay_req(3); dreq-- }
#endif
  :: atomic { rst > 0 && (mst[0] != S_NONE || mst[1] != S_NONE || mst[2] != S_NONE) ->
       printf("T=%d FAULT client 0's connections reset\n", T); lose_msg(0); lose_msg(1); lose_msg(2); rst-- }
  :: atomic { rst > 0 && (mst[3] != S_NONE || mst[4] != S_NONE || mst[5] != S_NONE) ->
       printf("T=%d FAULT client 1's connections reset\n", T); lose_msg(3); lose_msg(4); lose_msg(5); rst-- }
#ifdef LIVE
  /* pub/sub */
  :: d_step { pub -> pub = 0;
       if :: nwait[0] > 0 -> wake[0] = 1 :: else -> skip fi;
       if :: nwait[1] > 0 -> wake[1] = 1 :: else -> skip fi }
  :: atomic { pub && ploss > 0 -> pub = 0; ploss--; printf("T=%d FAULT unlock message lost\n", T) }
  :: atomic { prst > 0 && (nwait[0] > 0 || nwait[1] > 0) -> prst--;  /* re-subscription wakes waiters */
       if :: nwait[0] > 0 -> wake[0] = 1 :: else -> skip fi;
       if :: nwait[1] > 0 -> wake[1] = 1 :: else -> skip fi }
#endif
  od
}

/* ---------------- time ---------------- */
#define REQ_DUE(s)  (mst[s] == S_REQ && ms[s] + CT <= now)
/* replies are read before time moves on, unless delayed (a fault) */
#define REP_DUE(s)  (mst[s] == S_REP && !mdel[s])
#define JUDGE_DUE(c) (went[c] && JUDGEABLE(c) && now + MARGIN >= dl[c] + DRIFT)
/* the watchdog runs on schedule: a renewal due is sent before time moves on */
#define RENEW_DUE(c) (went[c] && live[c] > nls[c] && !SUSPENDED(c) && mst[SLOT(c,2)] == S_NONE && now + LEASE >= dl[c] + RI)

#ifndef LIVE
active proctype Clock()
{
  byte i;
end:
  do
  :: d_step {
       !REQ_DUE(0) && !REQ_DUE(1) && !REQ_DUE(2) && !REQ_DUE(3) && !REQ_DUE(4) && !REQ_DUE(5) &&
       !REP_DUE(0) && !REP_DUE(1) && !REP_DUE(2) && !REP_DUE(3) && !REP_DUE(4) && !REP_DUE(5) &&
       !JUDGE_DUE(0) && !JUDGE_DUE(1) && !RENEW_DUE(0) && !RENEW_DUE(1) ->
       T++; printf("T=%d tick\n", T);
#define PAST(v) if :: v > 0 -> v-- :: else -> skip fi
       PAST(rexp); PAST(dl[0]); PAST(dl[1]);
       PAST(gsent[0]); PAST(gsent[1]); PAST(gsent[2]); PAST(gt0[0]); PAST(gt0[1]); PAST(gt0[2]);
       i = 0;
       do
       :: i < 6 -> if :: mst[i] != S_NONE -> PAST(ms[i]) :: else -> skip fi; i++
       :: else -> break
       od;
       i = 0;
       do
       :: i < NR -> if :: lv[i] != 0 -> PAST(lt[i]); if :: lt[i] + LTTL <= now -> lv[i] = 0; lt[i] = 0 :: else -> skip fi :: else -> skip fi; i++
       :: else -> break
       od;
       i = 0;
       if
       :: rf != 0 && rexp <= now ->
          /* lease expiry: its holder was told before (loss signalled in time) */
          printf("T=%d key expires (field %d)\n", T, rf);
          assert(live[rf-1] == 0);
#ifdef WITNESS
          expired = 1;
#endif
          rf = 0; rc = 0; rexp = 0
       :: else -> skip
       fi;
       check_counts()
     }
  od
}
#endif

/* ---------------- the watchdog (one entry per ledger) ---------------- */
inline lose_all(c) {
  printf("T=%d client %d: every live Held ends (lost)\n", T, c);
  gh[2*c] = 0; gcs[2*c] = 0; glh[2*c] = 0;   /* G0 (client A), G2 (client B) */
  if :: c == 0 -> gh[1] = 0; gcs[1] = 0; glh[1] = 0 :: else -> skip fi;
  live[c] = 0; nls[c] = 0; went[c] = 0; dl[c] = 0;
  mg[SLOT(c,2)] = 0         /* a renewal in flight no longer belongs to a live entry */
}

proctype Watchdog(byte c)
{
  byte s = SLOT(c,2);
end:
  do
  :: atomic { RENEW_DUE(c) ->
       mt[s] = T_REN; ms[s] = now; mg[s] = wgen[c]; mst[s] = S_REQ;
#ifdef WITNESS
       pb[s] = REQMASK(c) & 3;
#endif
     }
  :: atomic { mst[s] == S_REP ->
       if
       :: went[c] && mg[s] == wgen[c] && mg[s] != 0 ->
          if
          :: mv[s] == R_RENEW -> dl[c] = MAX(dl[c], ms[s] + LEASE)
          :: mv[s] == R_RENEW0 && !SUSPENDED(c) -> lose_all(c)   /* renewal answered 0 */
          :: else -> skip
          fi
       :: else -> skip
       fi;
       clear_slot(s) }
  /* the judgement: client time >= deadline - margin; client time is
     within DRIFT of server time, so it falls in [dl-M-D, dl-M+D] */
  :: atomic { went[c] && JUDGEABLE(c) && now + MARGIN + DRIFT >= dl[c] ->
       printf("T=%d watchdog %d judges the lease lost (deadline %d)\n", T, c, dl[c]);
       lose_all(c) }
  od
}

/* ---------------- clients: common parts ---------------- */
#ifdef M3
#define RS 1      /* releases on another connection, without the turn */
#else
#define RS 0
#endif

/* let the turn go (inside an atomic sequence) */
inline let_turn() {
  turn[c] = 0; check_counts()
}
#ifdef M3
#define RTURN rturn
#else
#define RTURN turn
#endif

inline send(k, typ, req, nn, ls) {
  atomic {
    assert(mst[SLOT(c,k)] == S_NONE);
    mt[SLOT(c,k)] = typ; mr[SLOT(c,k)] = req; mn[SLOT(c,k)] = nn; ml[SLOT(c,k)] = ls;
    ms[SLOT(c,k)] = now; mst[SLOT(c,k)] = S_REQ; busyop[c]++;
    printf("T=%d G%d(client %d) sends %e req=%d n=%d lease=%d on conn %d\n", T, g, c, typ, req, nn, ls, k);
#ifdef WITNESS
    pb[SLOT(c,k)] = REQMASK(c) & ~(1 << k);
#endif
  }
}

/* wait for the answer on slot k: x = reply (0: none: the request or its
   reply was lost, or the request is delayed past the timeout), y = count */
inline await(k) {
  if
  :: mst[SLOT(c,k)] == S_REP -> x = mv[SLOT(c,k)]; y = mc[SLOT(c,k)]; clear_slot(SLOT(c,k));
     printf("T=%d G%d gets %e (count %d)\n", T, g, x, y)
  :: mst[SLOT(c,k)] == S_NONE -> x = 0; y = 0;
     printf("T=%d G%d: no answer\n", T, g)
  fi;
  busyop[c]--
}

/* a new request id. Once an operation's outcome is known and no message
   names its id (no delayed copy in flight, not unsettled), its record is
   never read again and is forgotten here (M1's background undo is a
   copy in flight on conn 1, so it names its id too) */
inline newreq() {
#ifndef M1
  if :: !NAMED(c, r) -> lv[r] = 0; lt[r] = 0 :: else -> skip fi;
#endif
  r = IDS*g;                /* the lowest id nothing names (fewer states than cycling) */
  if :: NAMED(c, r) -> r++ :: else -> skip fi;
  if :: NAMED(c, r) -> r++ :: else -> skip fi;
  lv[r] = 0; lt[r] = 0
}

/* the request r of the turn holder may still run: record it for the
   settler (ledger.unsettled); h: the goroutine + 1 whose Held it releases */
inline unsettle(h) {
  uns[c] = r + 1; ugh[c] = h;
  printf("T=%d G%d leaves req=%d unsettled\n", T, g, r)
}

/* A release whose answer is lost is sent again only while a copy still
   runs before the first copy's latch can expire (held.go: the retry's
   horizon, first send + record TTL - 2 CommandTimeout) */
#ifdef M6
#define RETRY_OK 1
#else
#define RETRY_OK (now + CT + 1 <= SENTV + LTTL)
#endif

/* ---------------- the settler (ledger.go: settle, settleLater, releaseStrays) ---------------- */
/* Settles the unsettled request holding the turn: fence it, read the
   count, apply; then releases strays when no Held is live. Every taker of
   the turn settles first in the code (attempt, unlock); here they wait for
   the settler instead, which only lets other turn takers in between. */
proctype Settler(byte c)
{
  byte g = 3 + c, r = IDS*(3 + c), x, y, sr, ph;
end:
  do
  :: atomic { ph == 0 && turn[c] == 0 && uns[c] != 0 ->
       turn[c] = g+1; sr = uns[c] - 1; send(0, T_SET, sr, 0, 0); ph = 1 }
  :: atomic { ph == 0 && turn[c] == 0 && uns[c] == 0 && live[c] == 0 && cnt[c] > 1 ->
       /* strays (more than one: one is adopted by the next acquire) */
       turn[c] = g+1; newreq(); send(0, T_REL, r, 0, LEASE); ph = 2 }
  :: atomic { ph == 1 && mst[SLOT(c,0)] != S_REQ ->
       await(0);
       if
       :: x == 0 -> let_turn(); ph = 0; sr = 0      /* lost: settled later, or by the next operation */
       :: x != 0 ->
          uns[c] = 0;
          if
          :: ugh[c] != 0 && gh[ugh[c]-1] > 0 && (x == R_STILL || x == R_REL) ->
             /* the unconfirmed release ran: its Held ends plainly */
             gh[ugh[c]-1]--; live[c]--;
             if :: glh[ugh[c]-1] -> glh[ugh[c]-1] = 0; nls[c]-- :: else -> skip fi;
             /* "released" while other Helds are live would be a loss not
                signalled before (the code ends them): never */
             assert(live[c] == 0 || x == R_STILL);
             if :: live[c] == 0 -> went[c] = 0; dl[c] = 0; mg[SLOT(c,2)] = 0
                :: else -> skip
             fi
          :: ugh[c] != 0 && gh[ugh[c]-1] > 0 && x == R_FENCED ->
             /* past the horizon: whether it ran cannot be told */
             lose_all(c)
          :: else -> skip
          fi;
          ugh[c] = 0;
          /* its record is read by nobody now, unless a delayed copy is in flight */
          if :: !NAMED(c, sr) -> lv[sr] = 0; lt[sr] = 0 :: else -> skip fi;
          assert(y >= live[c]);                    /* reconcile: never fewer (as above) */
          cnt[c] = y;
          if
          :: live[c] == 0 && cnt[c] > 0 -> newreq(); send(0, T_REL, r, 0, LEASE); ph = 2
          :: else -> let_turn(); ph = 0
          fi;
          sr = 0
       fi;
       x = 0; y = 0 }
  :: atomic { ph == 2 && mst[SLOT(c,0)] != S_REQ ->
       await(0);
       if
       :: x == R_STILL -> cnt[c] = MAX(cnt[c] - 1, 1);
          assert(live[c] == 0);   /* nobody acquires while the settler has the turn */
          newreq(); send(0, T_REL, r, 0, LEASE)
       :: x == R_REL || x == R_NOTH -> cnt[c] = 0; let_turn(); ph = 0
       :: x == 0 -> unsettle(0); let_turn(); ph = 0
       fi;
       x = 0; y = 0 }
  od
}

/* ---------------- goroutines ---------------- */
/* goroutine phases */
#define P_LOCK     1   /* waiting for the turn to send an acquire */
#define P_ACQ      2   /* acquire in flight */
#define P_GIVE     5   /* give-back (release of an unusable grant) in flight */
#define P_BUSYW    6   /* waiting for a wake-up */
#define P_UNL      7   /* waiting for the turn to send a release */
#define P_REL      8   /* release in flight */
#define P_RELB     9   /* release backing off before a retry */
#define P_RETAKE  10   /* M2: retaking the turn for a release retry */
#define P_DONE    11

#define SENTV gsent[g]
#define T0V gt0[g]
#define ACQ_SENT() send(0, T_ACQ, r, n, ls); if :: first -> SENTV = now; first = 0 :: else -> skip fi

/* the next operation of the goroutine: G0 Lock, Lock(Lease), Unlock, Unlock;
   G1 and G2 Lock, Unlock, Lock, Unlock. Locals are reset (fewer states). */
inline next_op() {
  x = 0; y = 0; n = 0; SENTV = 0; late = 0; stray = 0; T0V = 0; resent = 0;
#ifndef M1
  if :: !NAMED(c, r) -> lv[r] = 0; lt[r] = 0 :: else -> skip fi;
#endif
  do
  :: i == 4 -> ph = P_DONE; break
  :: i < 4 && ((nested && i < 2) || (!nested && i % 2 == 0)) ->
     ls = (nested && i == 1 -> SLEASE : LEASE);
     newreq(); first = 1; ph = P_LOCK; break
  :: i < 4 && !((nested && i < 2) || (!nested && i % 2 == 0)) ->
     ls = 0;
     if
     :: gh[g] == 0 -> gcs[g] = 0; i++   /* ended by a loss: Unlock returns the LostError */
     /* in its critical section still with another Held (one whose
        release is unconfirmed does not count) */
     :: else -> gcs[g] = (gh[g] > (ugh[c] == g+1 -> 2 : 1)); ph = P_UNL; break
     fi
  od
}

/* the acquire attempt is over without a Held: try again with a new request */
inline again() {
  let_turn(); newreq(); first = 1; resent = 0; late = 0; x = 0; y = 0; SENTV = 0; ph = P_LOCK
}

inline end_release() {
  relfl[c]--; relop[c]--; lastrel[c] = 0;
  RTURN[c] = 0; check_counts()
}

/* the release's outcome is unknown and it will not be sent again: Unlock
   fails (unconfirmed); the Held stays, not renewed, until the settler
   learns what the release did */
inline rel_unconfirmed() {
  printf("T=%d G%d: unlock unconfirmed\n", T, g);
  unsettle(g+1);
  if :: !glh[g] -> glh[g] = 1; nls[c]++ :: else -> skip fi;
  end_release(); gcs[g] = 0; i++; next_op()
}

/* a release of a Held that ended meanwhile got no answer: settled later */
inline rel_orphan() {
  unsettle(0); end_release(); i++; next_op()
}

proctype G(byte g; byte c; bit nested)
{
  byte r = IDS*g, n, x, y, i, ph, ls;
  bit late, first, stray, resent;
  atomic { next_op() }
end:
  do
  /* ---- Lock (mutex.go: attempt, request, send) ---- */
  :: atomic { ph == P_LOCK && turn[c] == 0 && uns[c] == 0 && !(live[c] == 0 && cnt[c] > 1) ->
       turn[c] = g+1;
       /* known(): with no live Held, one stray is adopted (told as one less) */
       n = (live[c] == 0 && cnt[c] == 1 -> 0 : cnt[c]);
       ACQ_SENT(); ph = P_ACQ }
  :: atomic { ph == P_ACQ && mst[SLOT(c,0)] != S_REQ ->
       await(0);
#if !defined(M7) && !defined(M1)
       /* answered after it was sent again: a copy may still be in flight,
          so it is fenced (settled) before anything else of the field */
       if :: x != 0 && resent -> unsettle(0); resent = 0 :: else -> skip fi;
#endif
       if
       :: x == 0 ->
          if
          /* retryFor: the same request again, until sent + lease - margin by the client's clock */
          :: now < SENTV + ls - MARGIN + DRIFT -> resent = 1; ACQ_SENT()
#ifdef M1
          :: send(1, T_UNDO, r, n, 0);    /* in the background, not ordered: the turn goes */
             again()
#else
          :: unsettle(0); again()         /* given up (or ctx ended): recorded for the settler */
#endif
          fi
       :: x == R_MIS ->         /* holds were lost: reconcile, then acquire afresh */
          /* reconcile ends every live Held when Redis counts fewer than
             them; that would be a loss not signalled before: never */
          assert(y >= live[c]);
          cnt[c] = y; again()
       :: x == R_BUSY ->
          let_turn(); resent = 0; x = 0; y = 0;
          first = 1; SENTV = 0;   /* the next attempt is a new command */
          nwait[c]++; ph = P_BUSYW
       :: x == R_ACQ || x == R_RAN ->
          cnt[c] = y;
          /* a reply after sent + lease - margin by the client's clock
             (the liveness run has no time: no reply is late) */
#ifdef LIVE
          late = 0;
#else
          if
          :: now + DRIFT < SENTV + ls - MARGIN -> late = 0
          :: now >= SENTV + ls - MARGIN + DRIFT -> late = 1
          :: else -> if :: late = 0 :: late = 1 fi
          fi;
#endif
          if
          :: late ->                /* unusable: give it back; the attempt failed */
             if
             :: uns[c] != 0 -> again()     /* settled first: the settler releases it as a stray */
             :: else -> newreq(); send(0, T_REL, r, 0, LEASE); SENTV = now; ph = P_GIVE
             fi
          :: else ->
             gh[g]++; live[c]++; gcs[g] = 1;
             if :: ls < LEASE -> nls[c]++; glh[g] = 1 :: else -> skip fi;
             if :: !went[c] -> went[c] = 1; wgen[c] = 3 - wgen[c]; dl[c] = SENTV + ls
                :: else -> dl[c] = MAX(dl[c], SENTV + ls) fi;
             printf("T=%d G%d holds (count %d, live %d, deadline %d)\n", T, g, cnt[c], live[c], dl[c]);
             /* mutual exclusion: no holder of another client that was not told */
             assert(!OTHERCS(c));
             let_turn();
             i++; next_op()
          fi
       :: x == R_CANC -> assert(false)   /* a new request is never fenced */
       fi }
  :: atomic { ph == P_GIVE && mst[SLOT(c,0)] != S_REQ ->
       /* giveBack: one command's time; a lost answer is left to the settler */
       await(0);
       if
       :: x == R_REL || x == R_NOTH -> cnt[c] = 0; again()
       :: x == R_STILL -> cnt[c] = MAX(cnt[c] - 1, 1); again()
       :: x == 0 -> unsettle(0); again()
       fi }
#ifdef LIVE
  /* a message, a re-subscription, or the holder's TTL (the key is gone) */
#ifdef NOTIMER  /* teeth for the liveness check: no TTL timer, messages only */
  :: atomic { ph == P_BUSYW && wake[c] -> wake[c] = 0; nwait[c]--; newreq(); ph = P_LOCK }
#else
  :: atomic { ph == P_BUSYW && (wake[c] || rf != 2-c) -> wake[c] = 0; nwait[c]--; newreq(); ph = P_LOCK }
#endif
#else
  /* safety runs: the waiter re-attempts once the other client's hold is
     gone (whatever woke it: a message, a re-subscription, its TTL timer).
     An attempt while the other client holds answers BUSY and changes
     nothing, so leaving those out loses no behaviour that matters. */
  :: atomic { ph == P_BUSYW && rf != 2-c -> nwait[c]--; newreq(); ph = P_LOCK }
#endif
  /* ---- Unlock (held.go: unlock; ledger.go: sendRelease, releaseStrays) ---- */
  :: atomic { ph == P_UNL && RTURN[c] == 0 && uns[c] == 0 ->
       if
       :: gh[g] == 0 -> gcs[g] = 0; i++; next_op()     /* lost while waiting for the turn */
       :: else ->
          RTURN[c] = g+1;
          relfl[c]++; relop[c]++; lastrel[c] = (cnt[c] <= 1); newreq(); stray = 0;
          send(RS, T_REL, r, 0, LEASE); SENTV = now; ph = P_REL
       fi }
  :: atomic { ph == P_REL && mst[SLOT(c,RS)] != S_REQ ->
       await(RS);
       if
       :: x == 0 && stray -> rel_orphan()            /* a stray release: settled later */
       :: x == 0 && !stray && gh[g] == 0 -> rel_orphan()   /* the Held ended meanwhile (h.ctx done) */
       :: x == 0 && !stray && gh[g] > 0 && !RETRY_OK -> rel_unconfirmed()
       :: x == 0 && !stray && gh[g] > 0 && RETRY_OK ->
#ifdef M2
          RTURN[c] = 0; check_counts(); ph = P_RETAKE
#else
          if
          :: send(RS, T_REL, r, 0, LEASE)
          :: T0V = now; ph = P_RELB
          fi
#endif
       :: x == R_FENCED -> assert(false)             /* a release is never fenced while its sender waits */
       :: x == R_STILL ->
          cnt[c] = MAX(cnt[c] - 1, 1);               /* a hold remains in Redis, known or not */
          if
          :: !stray && gh[g] > 0 ->
             gh[g]--; live[c]--;
             if :: glh[g] -> glh[g] = 0; nls[c]-- :: else -> skip fi;
             if :: live[c] == 0 -> went[c] = 0; dl[c] = 0; mg[SLOT(c,2)] = 0 :: else -> skip fi
          :: else -> skip
          fi;
          /* strays: no live Held remains but Redis still counts (releaseStrays) */
          if
#ifdef M3
          :: live[c] == 0 ->        /* db82bdb's releaseExtra: no in-flight check */
#else
          :: live[c] == 0 && cnt[c] > 0 ->
#endif
             stray = 1; newreq(); send(RS, T_REL, r, 0, LEASE); SENTV = now
          :: else -> end_release(); i++; next_op()
          fi
       :: x == R_REL || x == R_NOTH ->
          /* released: this Held ends plainly. The code ends any other live
             Held with a LostError, and all of them on "not held"; that
             would be a loss not signalled before: never */
          assert(live[c] <= (x == R_REL && !stray && gh[g] > 0 -> 1 : 0));
          cnt[c] = 0;
          if
          :: live[c] > 0 -> gh[g]--; live[c]--;
             if :: glh[g] -> glh[g] = 0; nls[c]-- :: else -> skip fi
          :: else -> skip
          fi;
          went[c] = 0; dl[c] = 0; mg[SLOT(c,2)] = 0;
          end_release(); i++; next_op()
       fi }
  :: atomic { ph == P_RELB && now > T0V && RETRY_OK && gh[g] > 0 -> T0V = 0; send(RS, T_REL, r, 0, LEASE); ph = P_REL }
  :: atomic { ph == P_RELB && !RETRY_OK && gh[g] > 0 -> T0V = 0; rel_unconfirmed() }
  :: atomic { ph == P_RELB && gh[g] == 0 -> T0V = 0; rel_orphan() }
#ifdef M2
  :: atomic { ph == P_RETAKE && RTURN[c] == 0 -> RTURN[c] = g+1; send(RS, T_REL, r, 0, LEASE); ph = P_REL }
#endif
  :: atomic { ph == P_DONE -> gcs[g] = 0; fin++; ph = 0 }; break
  od
}

init {
  atomic {
    run Watchdog(0); run Watchdog(1);
#ifndef LIVE
    run Settler(0); run Settler(1);
#endif
    run G(0, 0, 1); run G(1, 0, 0); run G(2, 1, 0)
  }
}

#ifdef LIVE
ltl live { <> (fin == 3) }
#endif
