/*
 * rlock: the fair lock's queue protocol as the code implements it
 * (lock/fair.go, lock/ledger.go, lock/mutex.go; reentrant/acquire_fair.lua,
 * leave_fair.lua, release_fair.lua, settle.lua), one lock name on one Redis
 * master. Checked with spin; see README.md, "The fair lock's queue".
 *
 *   clients: A (index 0, field 1) with goroutines G0 and G1 sharing one
 *            owner (one ledger, one field, one place in the queue);
 *            B (index 1, field 2) with goroutine G2.
 *   each goroutine: Lock (FairMutex) NL times; a Lock may give up (its ctx
 *            ends) at any wait; a granted Lock is released (Unlock).
 *   each client has a settler (lock.Client.later: settleLater and the
 *            leave it finishes).
 *
 * Switches (all off = the code):
 *   M1    the leave is sent before the field's unsettled request is
 *         settled (leaveFair does not settle first, leaveNow does not wait
 *         for the settlement): a late copy queues the field again
 *   M2    the leave is sent by each acquisition that gives up, even while
 *         another acquisition of the field (a goroutine sharing the owner)
 *         still waits in the field's one place
 *   M3    no leave at all (an acquisition that gives up stays queued)
 *   M4    an acquire answered after it was sent again is not fenced
 *   M5    leaveFair does not release the holds its settlement revealed
 *         (a grant whose reply was lost before the caller gave up), nor
 *         does the settler when it found nothing to settle: the model's
 *         D1, fixed in the code (a hold nobody has, until its lease)
 *   M6    giveBack releases without settling the field's unsettled
 *         request first: the model's D2, fixed in the code (a late copy
 *         of the acquire queues the field after its grant was given back)
 *   PRUNE a script may prune the queue's head (its timeout passed): any
 *         head, at any run of the acquire or the release
 *   LIVE  the liveness configuration: LTL <> fin==NG under weak fairness
 *   NOS4  S4 is not checked (to see which other property a mutation breaks)
 *   PLAINT  the scripts' scratch variables are not hidden (pan -DBFS refuses hidden ones)
 */

/* fault budgets (per run) */
#ifndef B_LREQ
#define B_LREQ 1        /* a request lost: it never runs */
#endif
#ifndef B_LREP
#define B_LREP 1        /* a reply lost: the request ran */
#endif
#ifndef B_DREQ
#define B_DREQ 1        /* an acquire delayed past its sender's timeout: it runs later */
#endif
/* Locks per goroutine */
#ifndef NL0
#define NL0 1
#endif
#ifndef NL1
#define NL1 1
#endif
#ifndef NL2
#define NL2 2
#endif

#define NG   3
#define IDS  3          /* request ids per client: the current one, the unsettled one, a delayed copy's */
#define QN   3          /* list capacity: room for a duplicate (S3 is asserted before it is made) */

mtype = { ACQ, SET, LEAVE, REL, GRANTED, BUSY, FEWER, CANCELLED, STILL, RELEASED, NOTHELD, DONE };
/* message states */
#define S_NONE 0
#define S_REQ  1
#define S_REP  2
#define S_LOST 3        /* the sender's timeout: request lost, reply lost, or request delayed */
/* attempt outcomes */
#define A_GRANT  1
#define A_BUSY   2
#define A_UNAV   3      /* ErrUnavailable: the blocking Lock rides it out */
#define A_CTX    4      /* the Lock's ctx ended */
#define SETTLER  9      /* the turn is the settler's */

/* ---------------- Redis ---------------- */
byte rf;                /* field holding the lock: 0 none, 1 A, 2 B */
byte rc;                /* its count */
byte q[QN];             /* redisson_lock_queue:{name}: the fields waiting, head first */
byte ql;
bit  zs[3];             /* redisson_lock_timeout:{name}: the field has a timeout (index: field) */
bit  rec[2*IDS];        /* the request's record (redisson_unlock_latch:{name}:<reqid>) */

/* ---------------- network: per client one slot (the turn holder's) and one delayed acquire copy */
mtype op[2];
byte st[2];
byte rid[2], rkn[2];
bit  rqf[2];            /* ARGV[6]: '1' to join the queue */
mtype ans[2];
byte acnt[2];
bit  apos[2];           /* the answer's position > 0 (the field is queued) */
bit  dst[2];            /* a delayed copy of an acquire in flight */
byte did[2], dkn[2];
bit  dqf[2];
byte lreq = B_LREQ, lrep = B_LREP, dreq = B_DREQ;

/* ---------------- clients (per ledger: client A's one field, client B's) */
byte turn[2];           /* 0 free, g+1, or SETTLER */
byte cnt[2];            /* ledger count */
byte live[2];           /* live Helds */
byte uns[2];            /* the unsettled request: its id + 1 */
byte queued[2];         /* fairLedger.queued */
bit  leave[2];          /* fairLedger.leave */
bit  fq[NG];            /* fairWait.queued of the goroutine's current acquisition */
byte npend[2];          /* later(l, nil) calls not yet run */
byte lfw[NG];           /* later(l, fw) calls of the goroutine's acquisitions not yet run (each fw still queued) */
bit  gcs[NG];           /* in its critical section (a live Held) */
bit  ended[NG];         /* its current Lock's ctx ended */
bit  placed[NG];        /* ghost: waiting, last answered "queued", the field's place not used since */
byte fin;               /* goroutines finished */

#define CL(g)     ((g) == 2 -> 1 : 0)
#define FLD(c)    ((c) + 1)
#define INQ(f)    ((ql > 0 && q[0] == (f)) || (ql > 1 && q[1] == (f)) || (ql > 2 && q[2] == (f)))
#define OTHERCS(c) ((c) == 0 -> gcs[2] : (gcs[0] || gcs[1]))

/* The queue's invariants after every script: the list and the zset name the
   same fields (S3 with them: a field is in the list at most once), and a
   field that holds the lock is not queued. */
inline check_queue() {
  assert(zs[1] == INQ(1) && zs[2] == INQ(2));
  assert(!(ql > 1 && q[0] == q[1]) && !(ql > 2 && (q[0] == q[2] || q[1] == q[2])));   /* S3 */
  assert(rf == 0 || !zs[rf])
}

inline lpop() {
  if
  :: ql > 0 -> q[0] = q[1]; q[1] = q[2]; q[2] = 0; ql--
  :: else -> skip
  fi
}

/* a field loses its place: clear the ghost of its waiting goroutines */
inline unplace(f) {
  if
  :: f == 1 -> placed[0] = 0; placed[1] = 0
  :: else -> placed[2] = 0
  fi
}

#ifdef PRUNE
/* the timed-out heads: any head's timeout may have passed (timeouts are not modelled) */
inline prune() {
  do
  :: ql > 0 -> zs[q[0]] = 0; unplace(q[0]); lpop()
  :: break
  od
}
#else
inline prune() { skip }
#endif

/* acquire_fair.lua for client c's field, request id, known kn, queue flag qf */
inline acquire(c, id, kn, qf, ra, rn, rp) {
  f = FLD(c);
  rp = 0; rn = 0;
  if
  :: rec[c*IDS + id] -> ra = CANCELLED
  :: else ->
     prune();
     cn = (rf == f -> rc : 0);
     if
     :: cn == kn + 1 -> ra = GRANTED; rn = cn            /* this request ran before */
     :: cn < kn -> ra = FEWER; rn = cn
     :: else ->
        if
        :: cn > 0 -> rc++; ra = GRANTED; rn = rc           /* re-entry */
        :: else ->
           if
           :: rf == 0 && (ql == 0 || q[0] == f) ->
              lpop(); zs[f] = 0; unplace(f);
              rf = f; rc = 1; ra = GRANTED; rn = 1
           :: else ->
              ra = BUSY;
              if
              :: zs[f] -> rp = 1
              :: else ->
                 if
                 :: qf ->
                    assert(!INQ(f) && ql < QN);             /* S3: rpush only when not queued */
                    q[ql] = f; ql++; zs[f] = 1; rp = 1
                 :: else -> skip
                 fi
              fi
           fi
        fi
     fi;
     check_queue()
  fi
}

/* leave_fair.lua */
inline leavefair(c) {
  f = FLD(c);
  /* S4: a field leaves only when none of its acquisitions still waits in its place */
#ifndef NOS4
  assert(f == 2 && !placed[2] || f == 1 && !placed[0] && !placed[1]);
#endif
  i = 0;
  do
  :: i < ql && q[i] == f ->                    /* lrem 0: every copy */
     j = i;
     do
     :: j + 1 < QN -> q[j] = q[j+1]; j++
     :: else -> break
     od;
     q[QN-1] = 0; ql--
  :: i < ql && q[i] != f -> i++
  :: i >= ql -> break
  od;
  zs[f] = 0;
  /* the wake-up of the next head when the leaver headed a free lock:
     waiters also wake on their timers (see README) */
  check_queue()
}

/* release_fair.lua (without its latch: releases are not faulted here) */
inline release(c, ra) {
  f = FLD(c);
  cn = (rf == f -> rc : 0);
  if
  :: cn > 1 -> rc--; ra = STILL
  :: cn == 1 -> prune(); rf = 0; rc = 0; ra = RELEASED    /* publishes to the head's channel */
  :: else -> ra = NOTHELD
  fi;
  check_queue()
}

/* settle.lua */
inline settle_script(c, id, rn) {
  f = FLD(c);
  rn = (rf == f -> rc : 0);
  rec[c*IDS + id] = 1      /* the fence (or the record that is already there) */
}

/* scratch of the scripts (hidden: always reset within the atomic step that uses them) */
#ifdef PLAINT
byte f, cn, i, j, rn;     /* (pan -DBFS refuses hidden variables) */
mtype ra;
byte rp;
#else
hidden byte f, cn, i, j, rn;
hidden mtype ra;
hidden byte rp;
#endif

/* Redis runs client c's request from its slot, one atomic script */
inline serve(c) {
  if
  :: op[c] == ACQ -> acquire(c, rid[c], rkn[c], rqf[c], ra, rn, rp); ans[c] = ra; acnt[c] = rn; apos[c] = rp
  :: op[c] == SET -> settle_script(c, rid[c], rn); ans[c] = DONE; acnt[c] = rn
  :: op[c] == LEAVE -> leavefair(c); ans[c] = DONE
  :: op[c] == REL -> release(c, ra); ans[c] = ra
  fi
}

/* Redis's own steps: the delayed copies, at any time */
active proctype Redis() {
  byte c;
end_redis:
  do
  :: atomic {
       (dst[0] || dst[1]) ->
       if
       :: dst[0] -> c = 0
       :: dst[1] -> c = 1
       fi;
       acquire(c, did[c], dkn[c], dqf[c], ra, rn, rp);
       printf("Redis runs the delayed copy of client %d's acquire req=%d: %e\n", c, did[c], ra);
       dst[c] = 0; did[c] = 0; dkn[c] = 0; dqf[c] = 0;
       c = 0; f = 0; cn = 0; i = 0; j = 0; ra = 0; rn = 0; rp = 0
     }
  od
}

/* The turn holder's request and its answer, or its timeout: one step.
   (A request runs in Redis between its send and its answer; the sender
   does nothing meanwhile, and what others do meanwhile is the same as
   what they do just before or just after, so the three are one step,
   and steps of others interleave between the sender's requests.)
   Faults: the request is lost; it runs and its reply is lost; an
   acquire is delayed past its sender's timeout and runs later (Redis's
   own step). Releases are not faulted here (rlock.pml checks them). */
inline xfer(c) {
  atomic {
    if
    :: serve(c); st[c] = S_REP
    :: lreq > 0 && op[c] != REL -> lreq--; printf("FAULT request lost\n"); st[c] = S_LOST
    :: lrep > 0 && op[c] != REL -> lrep--; printf("FAULT reply lost\n"); serve(c); st[c] = S_LOST
    :: dreq > 0 && op[c] == ACQ && !dst[c] ->
       dreq--; printf("FAULT request delayed\n");
       dst[c] = 1; did[c] = rid[c]; dkn[c] = rkn[c]; dqf[c] = rqf[c];
       st[c] = S_LOST
    fi;
    f = 0; cn = 0; i = 0; j = 0; ra = 0; rn = 0; rp = 0
  }
}

/* a fresh request id: the lowest one no unsettled request or delayed copy names;
   its old record is unreadable (nothing names it) and is dropped */
inline fresh(c, id) {
  id = 0;
  do
  :: uns[c] == id + 1 || (dst[c] && did[c] == id) -> id++
  :: else -> break
  od;
  assert(id < IDS);
  rec[c*IDS + id] = 0
}

/* Client.settle, holding the turn: retried until it is answered, or (quit)
   until its ctx ends after a lost answer. ok: settled. */
inline settle(c, quit, ok) {
  ok = 1;
  if
  :: uns[c] != 0 ->
     do
     :: op[c] = SET; rid[c] = uns[c] - 1; xfer(c);
        if
        :: st[c] == S_REP ->
           st[c] = S_NONE; printf("client %d SETTLE req=%d: count=%d (fenced)\n", c, uns[c] - 1, acnt[c]); uns[c] = 0;
           assert(acnt[c] >= live[c]);       /* reconcile: never fewer holds than live Helds */
           cnt[c] = acnt[c];
           break
        :: else ->
           st[c] = S_NONE;
           if
           :: quit -> ok = 0; break
           :: true                           /* sent again */
           fi
        fi
     od
  :: else -> skip
  fi
}

/* Client.leaveNow, holding the turn */
inline leavenow(c, quit, ok) {
  ok = 1;
#if defined(M1) && defined(M2)
  if :: leave[c] ->
#elif defined(M1)
  if :: leave[c] && queued[c] == 0 ->
#elif defined(M2)
  if :: leave[c] && uns[c] == 0 ->
#else
  if :: leave[c] && queued[c] == 0 && uns[c] == 0 ->
#endif
     do
     :: op[c] = LEAVE; xfer(c);
        if
        :: st[c] == S_REP -> st[c] = S_NONE; leave[c] = 0; printf("client %d LEAVE ran\n", c); break
        :: else ->
           st[c] = S_NONE;
           if
           :: quit -> ok = 0; break
           :: true
           fi
        fi
     od
  :: else -> skip
  fi
}

/* Client.releaseStrays, holding the turn (releases are not faulted) */
inline releasestrays(c) {
  do
  :: live[c] == 0 && cnt[c] > 0 && uns[c] == 0 ->
     op[c] = REL; xfer(c); st[c] = S_NONE;
     printf("client %d releases a stray hold: %e\n", c, ans[c]);
     if
     :: ans[c] == STILL -> cnt[c] = (cnt[c] > 1 -> cnt[c] - 1 : 1)
     :: else -> cnt[c] = 0
     fi
  :: else -> break
  od
}

/* the settler: each later(l, fw) / settleLater(l) call, one at a time (they take the turn) */
proctype Settler(byte c) {
  byte w;       /* the goroutine whose fairWait the call uncounts, + 1 */
  bit ok;
end_settler:
  do
  :: atomic {
       turn[c] == 0 && (npend[c] > 0 || (c == 0 && (lfw[0] > 0 || lfw[1] > 0)) || (c == 1 && lfw[2] > 0)) ->
       turn[c] = SETTLER; printf("settler %d runs\n", c);
       if
       :: npend[c] > 0 -> npend[c]--; w = 0
       :: c == 0 && lfw[0] > 0 -> lfw[0]--; w = 1
       :: c == 0 && lfw[1] > 0 -> lfw[1]--; w = 2
       :: c == 1 && lfw[2] > 0 -> lfw[2]--; w = 3
       fi;
       if
       :: w > 0 ->               /* leftFair(fw): that fw is still queued (only its later call uncounts it) */
          queued[c]--;
#ifdef M2
          leave[c] = 1
#else
          leave[c] = (queued[c] == 0)
#endif
       :: else -> skip
       fi;
#ifndef M3
       if
#ifndef M5
       :: uns[c] == 0 -> leavenow(c, 0, ok); releasestrays(c)   /* the proposed fix */
#else
       :: uns[c] == 0 -> leavenow(c, 0, ok)
#endif
       :: else -> settle(c, 0, ok); leavenow(c, 0, ok); releasestrays(c)
       fi;
#else
       settle(c, 0, ok); releasestrays(c);
#endif
       turn[c] = 0; w = 0; ok = 0
     }
  od
}

/* one attempt (Mutex.attempt + request + send) of goroutine g; fair: its
   request asks to join the queue (runFair's loop; direct()'s re-entry
   attempt does not). res: A_GRANT, A_BUSY, A_UNAV, A_CTX */
inline attempt(g, c, fair, res) {
  res = 0;
  if
  :: atomic { turn[c] == 0 -> turn[c] = g + 1 }
  :: turn[c] != 0 -> ended[g] = 1; placed[g] = 0; res = A_CTX;     /* its ctx ends while it waits for the turn */
     printf("G%d: ctx ends waiting for the turn\n", g)
  fi;
  if
  :: res == 0 ->
     settle(c, 1, ok);                                  /* an earlier request's fate first */
     if
     :: !ok -> res = A_UNAV
     :: else ->
        /* known() */
        if
        :: cnt[c] == 0 || live[c] > 0 -> kn = cnt[c]
        :: else ->
           if
           :: cnt[c] > 1 -> releasestrays(c)
           :: else -> skip
           fi;
           kn = (cnt[c] != 1 || uns[c] != 0 -> cnt[c] : cnt[c] - 1)
        fi;
        if
        :: fair ->                                      /* joinFair */
           if
           :: !fq[g] -> fq[g] = 1; queued[c]++
           :: else -> skip
           fi;
           leave[c] = 0
        :: else -> skip
        fi;
        fresh(c, id);
        sends = 0;
        do
        :: op[c] = ACQ; rid[c] = id; rkn[c] = kn; rqf[c] = fair; xfer(c); sends++;
           if
           :: st[c] == S_REP -> st[c] = S_NONE; aa = ans[c]; ac = acnt[c]; ap = apos[c];
              printf("G%d ACQUIRE req=%d known=%d queue=%d (send %d): %e count=%d queued=%d\n", g, id, kn, fair, sends, aa, ac, ap);
              break
           :: else ->
              st[c] = S_NONE;
              if
              :: true                                   /* sent again, the same request id */
              :: true ->                                /* its ctx ends, or its lease-margin passes */
                 if
                 :: ended[g] = 1; placed[g] = 0; res = A_CTX
                 :: res = A_UNAV
                 fi;
                 printf("G%d ACQUIRE req=%d: no answer (send %d); gives up on it (%d: 3 retry later, 4 ctx ended): unsettled\n", g, id, sends, res);
                 uns[c] = id + 1; npend[c]++;           /* unsettled: settleLater */
                 break
              fi
           fi
        od;
        if
        :: res == 0 ->
#ifndef M4
           if
           :: sends > 1 ->                              /* fence: settled at once */
              uns[c] = id + 1; settle(c, 1, ok);
              if
              :: !ok -> npend[c]++
              :: else -> skip
              fi
           :: else -> skip
           fi;
#endif
           if
           :: aa == BUSY ->
              res = A_BUSY;
              placed[g] = fair && ap && zs[FLD(c)]     /* ghost: and still queued (a late copy's grant may have used the place) */
           :: aa == GRANTED ->
              cnt[c] = ac;
              if                                        /* leftFair */
              :: fq[g] -> fq[g] = 0; queued[c]--
              :: else -> skip
              fi;
              /* S1: the lock is this field's, and no goroutine of the other field holds */
              assert(rf == FLD(c) && !OTHERCS(c));
              if
              :: true -> live[c]++; gcs[g] = 1; res = A_GRANT; placed[g] = 0; printf("G%d holds\n", g)
              :: true -> ended[g] = 1; placed[g] = 0;       /* its ctx ended meanwhile: give back */
#ifndef M6
                 settle(c, 1, ok);                          /* the proposed fix: settle first */
                 if
                 :: ok ->
#endif
                 op[c] = REL; xfer(c); st[c] = S_NONE; printf("G%d: ctx ended, gives the grant back: %e\n", g, ans[c]);
                 if
                 :: ans[c] == STILL -> cnt[c] = (cnt[c] > 1 -> cnt[c] - 1 : 1)
                 :: else -> cnt[c] = 0
                 fi;
#ifndef M6
                 :: else -> skip                            /* the settler settles, then releases it as a stray */
                 fi;
#endif
                 res = A_CTX
              fi
           :: else -> assert(false)   /* FEWER (no hold is lost here: no expiry), CANCELLED (a new id is never fenced) */
           fi
        :: else -> skip
        fi
     fi;
     turn[c] = 0
  :: else -> skip
  fi;
  id = 0; kn = 0; sends = 0; ok = 0; aa = 0; ac = 0; ap = 0
}

/* leaveFair: an acquisition that ends without the lock */
inline leavefairc(g, c) {
  if
  :: fq[g] ->
     if
     :: atomic { turn[c] == 0 -> turn[c] = g + 1 };
        fq[g] = 0; queued[c]--;
#if defined(M3)
        skip;
#else
#ifdef M2
        if :: true ->
#else
        if :: queued[c] == 0 ->
#endif
           leave[c] = 1;
#ifndef M1
           settle(c, 1, ok);
           if
#ifndef M5
           :: ok -> releasestrays(c); leavenow(c, 1, ok)   /* the proposed fix */
#else
           :: ok -> leavenow(c, 1, ok)
#endif
           :: else -> skip
           fi;
#else
           leavenow(c, 1, ok);
#endif
           if
           :: !ok -> npend[c]++
           :: else -> skip
           fi
        :: else -> skip
        fi;
#endif
        turn[c] = 0
     :: turn[c] != 0 -> lfw[g]++; fq[g] = 0;         /* no turn within 2 CommandTimeouts: later(l, fw); the next Lock has a fresh fw */
        printf("G%d leaveFair: no turn, later(l, fw)\n", g)
     fi
  :: else -> skip
  fi;
  ok = 0
}

proctype G(byte g) {
  byte c = CL(g);
  byte n, res, id, kn, sends, ac;
  mtype aa;
  bit ok, ap;
  n = (g == 0 -> NL0 : (g == 1 -> NL1 : NL2));
  /* Local steps take no time: each attempt, leave and Unlock is atomic
     up to its waits (for the turn, for an answer), where others move. */
  do
  :: n == 0 -> break
  :: n > 0 ->
     atomic {
       n--; ended[g] = 0; placed[g] = 0;
       assert(!fq[g]);                                 /* a fresh fairWait */
       res = 0;
       /* direct(): a re-entry attempt when the owner holds */
       if
       :: live[c] > 0 -> attempt(g, c, 0, res)
       :: else -> skip
       fi
     };
     if
     :: res == A_GRANT -> skip
     :: res == A_UNAV || res == A_CTX -> skip            /* the Lock fails (nothing queued) */
     :: else ->
        do                                              /* runFair */
        :: atomic { attempt(g, c, 1, res) };
           if
           :: res == A_GRANT || res == A_CTX -> break
           :: else ->                                   /* busy: asleep until woken or its timer; unavailable: backoff */
              if
              :: true
              :: atomic { ended[g] = 1; placed[g] = 0; res = A_CTX; printf("G%d: ctx ends while it waits\n", g) }; break
              fi
           fi
        od;
        if
        :: res != A_GRANT -> atomic { placed[g] = 0; leavefairc(g, c) }
        :: else -> skip
        fi
     fi;
     if
     :: res == A_GRANT ->
        /* critical section; then Unlock (not cancelled) */
        atomic {
          turn[c] == 0 -> turn[c] = g + 1;
          settle(c, 0, ok);                             /* an earlier request's fate first (retried: Unlock's ctx is not ended here) */
          gcs[g] = 0;
          op[c] = REL; xfer(c); st[c] = S_NONE;
          printf("G%d RELEASE: %e\n", g, ans[c]);
          live[c]--;
          if
          :: ans[c] == STILL ->
             cnt[c] = (cnt[c] > 1 -> cnt[c] - 1 : 1);
             if
             :: live[c] == 0 -> releasestrays(c)
             :: else -> skip
             fi
          :: ans[c] == RELEASED -> cnt[c] = 0
          :: else -> assert(false)                      /* not held: a hold lost (no expiry here) */
          fi;
          turn[c] = 0
        }
     :: else -> skip
     fi;
     res = 0
  od;
  atomic { res = 0; id = 0; kn = 0; sends = 0; ok = 0; n = 0; fin++ }
}

/* S2 (and S5): when every goroutine has finished and nothing is in flight or
   pending, no field is queued (nobody who gave up stays queued), and no
   hold is left (nobody holds a hold no goroutine has) */
active proctype Quiet() {
  atomic {
    fin == NG && st[0] == S_NONE && st[1] == S_NONE && !dst[0] && !dst[1] &&
    npend[0] == 0 && npend[1] == 0 && lfw[0] == 0 && lfw[1] == 0 && lfw[2] == 0 &&
    turn[0] == 0 && turn[1] == 0 ->
    printf("quiet: queue length %d, holder %d count %d\n", ql, rf, rc);
    assert(ql == 0);        /* S2 */
    assert(rf == 0)         /* S5 */
  }
}

init {
  atomic {
    run Settler(0); run Settler(1);
    run G(0); run G(1); run G(2)
  }
}

#ifdef LIVE
ltl live { <> (fin == NG) }
#endif
