/*
 * replicas.pml: replica sync (lock/replicas.go) around a failover.
 *
 * One lock name on a master M with one replica R. M's writes reach R
 * through an asynchronous replication link (the channel repl), which can
 * lag and can be cut (a partition) at any point. A failover kills M and
 * promotes R with what R has received; Client B then acquires on R.
 *
 * Client A follows lock/replicas.go as of eddd127: before each acquire
 * and release it decides whether to send WAIT from its cached ROLE count
 * (syncAt: learnReplicas when there is no count or it is stale), and
 * notes each WAIT answer (acked). An acquire is a Held only when
 * lock/mutex.go request would return one: with WAIT sent, at least one
 * replica acknowledged it; otherwise it is given back (giveBack, a
 * release with its own sync) and tried again, maxUnsynced = 3 times per
 * Lock call (unusable).
 *
 * Property: Client B is never granted the lock (on the promoted replica)
 * while A holds a Held it has not been told is lost.
 *
 * Switches (spin -D...):
 *   R31   the code of 841bfb0: learnReplicas reads any failed ROLE as
 *         "unknown, none", a deadline-cut one as "none"; syncAt sends no
 *         WAIT when n == 0 && (!had || unknown); acked deletes the count;
 *         a refused ROLE is no error (safety-3 R3-1, and R3-2 with DENY).
 *   R32   a ROLE refused by the ACL is read as a master listing no
 *         replica (as a Sentinel check might: "nothing to tell"): no
 *         WAIT and no ErrAuth (safety-3 R3-2).
 *   MHAD  "seen with replicas" follows the last ROLE answer instead of
 *         sticking (had kept in the count that each answer replaces).
 *   CUTEARLY  drop the assumption that the Client saw the replica before
 *         a cut: the documented residual window (docs/safety.md §1).
 * Bounds: B_LOST, B_DL, B_DENY (ROLE answers lost, cut short by the
 * caller's deadline, refused), DENYALL (every ROLE refused: a user
 * without +role), NCALLS (A's Lock calls).
 */

#ifndef NCALLS
#define NCALLS 2
#endif
#ifndef B_LOST
#define B_LOST 2
#endif
#ifndef B_DL
#define B_DL 1
#endif
#ifndef B_DENY
#define B_DENY 1
#endif
#ifndef DENYALL
#define DENYALL 0
#endif
#define MAXUNSYNCED 3
byte a, x;               /* scratch */

/* the servers */
byte mh;                 /* M's key: 1 held by A, 0 free */
byte rh;                 /* R's copy of it */
chan repl = [8] of { byte };  /* M's writes not yet applied by R */
bool cut;                /* the link M -> R is cut (for good) */
bool dead;               /* M killed, R promoted */
bool bgranted;

/* Client A */
bool heldA;              /* A has a live Held, not told of a loss */
byte lost = B_LOST, dl = B_DL, deny = B_DENY;
/* its stored replicaCount for M (c.reps.m[M]) and c.reps.had[M] */
bool ent;                /* an entry exists */
byte sn;                 /* n */
bool sknown;             /* known (R31: !unknown) */
bool forced;             /* asked is zero: stale for certain */
bool sref;               /* refused */
bool had;
/* the count a syncAt decided with (its local rc) */
byte ln; bool lk; bool lref;
/* the request's sync and answers */
byte W;                  /* Sync.Replicas: 0 = no WAIT */
short acked;             /* WAIT's answer; -1 when no WAIT was sent */
bool autherr;            /* sync returned ErrAuth */
byte unsynced, tries, calls;
bool failed;             /* the request found M gone */
bool owned;              /* New asked ROLE (lock.New); else FromClient */
bool norep;              /* M has no replica at all (no failover) */
bool ready;              /* the topology is chosen */

/* ROLE as M answers it: the replica while attached; once cut, the master
 * may still list it (not noticed yet) or list none. Assumption (without
 * CUTEARLY): the Client's first answered ROLE lists the replica. */
inline roleAnswer(a) {
  if
  :: norep -> a = 0
  :: !norep && !cut -> a = 1
  :: !norep && cut -> a = 1
  :: !norep && cut && had -> a = 0
#ifdef CUTEARLY
  :: !norep && cut && !had -> a = 0
#endif
  fi
}

/* learnReplicas(ctx, M): sets the local count (ln, lk, lref) and, unless
 * the caller's deadline cut it short, the stored one. */
inline learn() {
  if
  :: !dead && !DENYALL ->                         /* answered */
     roleAnswer(a);
     ent = 1; sn = a; sknown = 1; forced = 0; sref = 0;
#ifdef MHAD
     had = (a > 0);
#else
     if :: a > 0 -> had = 1 :: else fi;
#endif
     ln = sn; lk = sknown; lref = sref
  :: dead || lost > 0 ->                          /* no answer: lost, reset, M gone */
     if :: !dead -> lost-- :: else fi;
#ifdef R31
     ent = 1; sn = 0; sknown = 0; forced = 0; sref = 0;
#else
     if :: !ent -> sn = 0 :: else fi;             /* the last count is kept */
     ent = 1; sknown = 0; forced = 0; sref = 0;
#endif
     ln = sn; lk = sknown; lref = sref
  :: !dead && dl > 0 ->                           /* cut short by the caller's deadline */
     dl--;
#ifdef R31
     ln = 0; lk = 1; lref = 0                     /* "counts as reporting none"; not stored */
#else
     if :: ent -> ln = sn :: else -> ln = 0 fi;   /* not stored; waits as for unknown */
     lk = 0; lref = (ent && sref)
#endif
  :: !dead && (DENYALL || deny > 0) ->            /* refused by the ACL */
     if :: !DENYALL -> deny-- :: else fi;
#if defined(R31)
     ent = 1; sn = 0; sknown = 0; forced = 0; sref = 0;
#elif defined(R32)
     ent = 1; sn = 0; sknown = 1; forced = 0; sref = 0;
#else
     if :: !ent -> sn = 0 :: else fi;
     ent = 1; sknown = 0; forced = 0; sref = 1;
#endif
     ln = sn; lk = sknown; lref = sref
  fi
}

/* syncAt(ctx, M, renewal=false): W and autherr. A count that exists and
 * was not forced stale may be fresh or stale (time is not modelled). */
inline syncAt() {
  autherr = 0;
  if
  :: ent && !forced -> ln = sn; lk = sknown; lref = sref   /* fresh */
  :: true -> learn()                                       /* none, or stale */
  fi;
#ifdef R31
  if
  :: ln == 0 && (!had || !lk) -> W = 0
  :: ln == 0 && had && lk -> W = 1
  :: ln > 0 -> W = ln
  fi
#else
  if
  :: lk && ln == 0 && !had -> W = 0
  :: else -> W = 1;                                /* max(n, 1): one replica */
     autherr = lref
  fi
#endif
}

/* a write of M, for R; a cut link carries nothing more (and, cut for
 * good, nothing it still held: see Link) */
inline push(v) {
  if :: !cut -> repl!v :: else fi
}

/* WAIT W after a write on M: R acknowledges only if every write of M so
 * far reached it (the link is up); a WAIT may also time out. */
inline wait() {
  if
  :: W == 0 -> acked = -1
  :: W > 0 && !cut && !norep ->
     do
     :: nempty(repl) -> repl?x; rh = x
     :: empty(repl) -> break
     od;
     acked = 1
  :: W > 0 -> acked = 0
  fi
}

/* acked(name, s, acked) */
inline noteAcked() {
  if
  :: W > 0 && acked != W ->
#ifdef R31
     ent = 0; sn = 0; sknown = 0; forced = 0; sref = 0   /* delete(c.reps.m, addr) */
#else
     if :: ent -> sknown = 0; forced = 1 :: else fi
#endif
  :: else
  fi
}

/* sendRelease: the release and its WAIT, sent again (answered by its
 * latch) until a replica acknowledged it, maxUnsynced times; a refused
 * ROLE still sends the WAIT. M gone: the release fails. */
inline release() {
  syncAt();
  tries = 1;
  do
  :: atomic {
       if
       :: dead -> failed = 1                     /* the release fails: M is gone */
       :: else ->
          if :: mh == 1 -> mh = 0; push(0) :: else fi;
          wait()
       fi
     };
     if :: failed -> failed = 0; break :: else fi;
     noteAcked();
     if
     :: W == 0 || acked > 0 || tries == MAXUNSYNCED -> break
     :: else -> tries++; syncAt();
        if :: W == 0 -> break :: else fi
     fi
  od
}

active proctype A() {
  atomic {
    if
    :: norep = 0
    :: norep = 1; cut = 1                        /* no replica: nothing to replicate to */
    fi;
    ready = 1
  };
  if
  :: owned = 1;                                  /* lock.New asks ROLE */
#ifdef NEWOK
     roleAnswer(a);                              /* answered: the Client saw M's replica */
     ent = 1; sn = a; sknown = 1; had = (a > 0);
     ln = sn; lk = 1; lref = 0;
#else
     learn();
#endif
#ifndef R31
     if :: lref -> goto done :: else fi           /* New fails: ErrAuth */
#endif
#ifndef NEWOK
  :: owned = 0                                   /* FromClient: asked before the first request */
#endif
  fi;
  calls = 0;
  do
  :: calls == NCALLS -> break
  :: calls < NCALLS ->
     calls++;
     unsynced = 0;
     do                                          /* attempt: request, again while unusable */
     :: syncAt();
        if
        :: autherr -> break                      /* ErrNotAcquired, ErrAuth naming ROLE */
        :: else
        fi;
        atomic {
          if
          :: dead -> failed = 1                  /* the request fails: M is gone */
          :: else ->
             assert(mh == 0);                    /* A alone acquires on M */
             mh = 1; push(1);                    /* the acquire script grants */
             wait()
          fi
        };
        if :: failed -> break :: else fi;
        noteAcked();
        if
        :: !(W > 0 && acked <= 0) ->             /* request returns a Held */
           heldA = 1;
           break
        :: else ->                               /* unusable: give it back */
           release();
           unsynced++;
           if :: unsynced == MAXUNSYNCED -> break :: else fi
        fi
     od;
     if
     :: heldA ->                                 /* critical section, then Unlock */
        heldA = 0;
        release()
     :: else
     fi
  od;
done:
  skip
}

/* the replication link: applies M's writes in order; may be cut */
active proctype Link() {
endnorep:                                        /* no replica: no link */
  ready && !norep;
  do
  :: atomic { !cut && nempty(repl) -> repl?x; rh = x }
  :: atomic { !cut -> cut = 1;                 /* what R has not got, it never gets */
       do :: nempty(repl) -> repl?x :: empty(repl) -> break od }
  :: atomic { dead -> break }
  od
}

/* the failover, then Client B on the promoted replica */
active proctype Failover() {
endnorep:                                        /* no replica: no failover */
  atomic {
    ready && !norep ->
    dead = 1; cut = 1;
    do :: nempty(repl) -> repl?x :: empty(repl) -> break od   /* lost with M */
  };
end:                                           /* B waits while R has A's hold */
  atomic {
    rh == 0 ->                                   /* B's acquire on R is granted */
    assert(!heldA);
    bgranted = 1
  }
}
