/*
 * kinds.pml: one holder field, two lock kinds (lock/mutex.go attempt,
 * dropOtherKind, known; lock/ledger.go settle, finishLater, releaseStrays;
 * reentrant/acquire_counted.lua, acquire_read.lua, release.lua,
 * release_read.lua, settle.lua), as of 527de24.
 *
 * One lock name. A reader's field is the plain lock's field, so an owner
 * X has one ledger for both kinds: its kind, its count, its unsettled
 * request and the live Held. X first locks the name as kind K1, and that
 * acquire's reply may be lost (its ctx ends: the request is unsettled; it
 * ran, or it is still on the wire and may run later). A background
 * settler (finishLater) settles it whenever X's turn is free, and may
 * lose its answer. Another owner Y locks the name as K1 and holds it.
 * Then X locks the name as the other kind K2 (or, to cover adoption, the
 * same kind again), and unlocks what it got.
 * K1 is read or plain (chosen at the start).
 *
 * Redis: one hash. Its layout is plain (no 'mode' field) or read ('mode'
 * = read); counts per field cnt[X], cnt[Y]. Scripts are atomic steps.
 *
 * Properties (assert, after every script and at every grant):
 *   - a live Held of kind K is backed by its field's count in a hash of
 *     K's layout: so no plain hold is granted beside another owner's read
 *     hold, and no release of one kind deletes the hash under another
 *     owner's live Held (nothing here tells a Held of a loss);
 *   - at a grant, the other owner has no live Held unless both are reads.
 *
 * Switches: OLDATTEMPT  attempt as in 841bfb0: the kind is switched first,
 *           the unsettled request settled after, and known() adopts a
 *           stray with the new kind's script (no dropOtherKind);
 *           OLDSCRIPTS  the scripts as in 841bfb0: no layout check;
 *           R33 = both (safety-3 R3-3).
 *           WEAK  check only that a live Held's count is in Redis and the
 *           exclusion at grants, not the layout (to see R3-3's double
 *           grant rather than the first wrong adoption).
 *           K1READ  only R3-3's direction: X's stray and Y's hold are
 *           reads, X's second Lock is the plain lock.
 * Bounds: B_LSET settlements whose answer is lost; NTRY attempts of X's
 * second Lock and of Y's Lock.
 */

#ifdef R33
#define OLDATTEMPT
#define OLDSCRIPTS
#endif
#ifndef B_LSET
#define B_LSET 1
#endif
#ifndef NTRY
#define NTRY 2
#endif

#define PLAIN 0
#define READ 1
#define X 0
#define Y 1
#define ACQ 1
#define BUSY 0
#define FEWER 2
#define CANC 3
#define STILL 0
#define RELD 1
#define NOTHELD 4

byte K1 = 2;                    /* the first kind: X's stray and Y's hold */
/* Redis */
byte cnt[2];                  /* holds of each field */
byte layout;                  /* the hash's layout while it exists */
bool rec1;                    /* X's first request's record (its fence) */
bool inflight;                /* X's first request still on the wire */
byte inknown;                 /* ... and the count it told the script */
/* X's ledger */
byte xkind = PLAIN;           /* ledger.kind: zero value, the plain lock */
byte xcount;                  /* ledger.count */
bool xunsettled;              /* ledger.unsettled (X's first request) */
bool xheld;                   /* a live Held */
byte xheldkind;
bool turn;                    /* X's turn is taken */
bool settling;                /* a settler was started (settleLater) */
/* Y */
bool yheld;
byte lset = B_LSET;
byte res, c, k, t;            /* scratch of X's steps */
byte yres, yc;                /* scratch of Y's steps */
byte sres;                    /* scratch of the settler */

#define exists (cnt[X] + cnt[Y] > 0)

/* a live Held is backed by its count in a hash of its kind's layout */
inline check() {
#ifdef WEAK
  assert(!xheld || cnt[X] > 0);
  assert(!yheld || cnt[Y] > 0);
#else
  assert(!xheld || (cnt[X] > 0 && layout == xheldkind));
  assert(!yheld || (cnt[Y] > 0 && layout == K1));
#endif
  assert(!(xheld && yheld) || (xheldkind == READ && K1 == READ))
}

/* acquire_counted.lua (kind PLAIN) and acquire_read.lua (READ) for field
 * f, told known, with record rc: r = ACQ/BUSY/FEWER/CANC, n the count */
inline acquire(kind, f, known, rc, r, n) {
  skip;
  if
  :: rc -> r = CANC
  :: else -> skip;
     if
     :: kind == PLAIN ->
        if
#ifndef OLDSCRIPTS
        :: exists && layout == READ -> r = BUSY               /* another layout */
#endif
        :: else -> skip;
           if
           :: cnt[f] == known + 1 -> r = ACQ                /* this request ran */
           :: cnt[f] < known -> r = FEWER   /* never reached: no expiry, and no hold taken from under a ledger */
           :: cnt[f] >= known && cnt[f] != known + 1 && (cnt[f] > 0 || !exists) ->
              if :: !exists -> layout = PLAIN :: else -> skip fi;
              cnt[f]++; r = ACQ
           :: cnt[f] >= known && cnt[f] != known + 1 && cnt[f] == 0 && exists -> r = BUSY
           fi
        fi
     :: kind == READ ->
        if
#ifndef OLDSCRIPTS
        :: exists && layout == PLAIN && cnt[f] > 0 -> r = BUSY   /* another layout */
#endif
        :: else -> skip;
           if
           :: cnt[f] == known + 1 -> r = ACQ
           :: cnt[f] < known -> r = FEWER   /* never reached: as above */
           :: cnt[f] >= known && cnt[f] != known + 1 ->
              if :: !exists -> layout = READ :: else -> skip fi;
              if
              :: layout == READ -> cnt[f]++; r = ACQ
              :: else -> r = BUSY
              fi
           fi
        fi
     fi
  fi;
  n = cnt[f];
  check()
}

/* release.lua (PLAIN) and release_read.lua (READ) for field f */
inline release(kind, f, r) {
  skip;
  if
  :: cnt[f] == 0 -> r = NOTHELD
#ifndef OLDSCRIPTS
  :: cnt[f] > 0 && exists && layout != kind -> r = NOTHELD   /* another layout */
#endif
  :: else -> skip;
     if
     :: cnt[f] > 1 -> cnt[f]--; r = STILL
     :: cnt[f] == 1 && kind == PLAIN -> cnt[X] = 0; cnt[Y] = 0; r = RELD   /* del: the whole hash */
     :: cnt[f] == 1 && kind == READ -> cnt[f] = 0; r = RELD   /* hdel, or del when it was the last */
     fi
  fi;
  check()
}

/* settle.lua for X's first request: fence it, read the count */
inline settleScript(n) {
  rec1 = 1; n = cnt[X]; check()
}

/* settle(l): the settlement's answer may be lost (budget) */
inline settle(ok) {
  if
  :: lset > 0 -> lset--; ok = 0                 /* answer lost: still unsettled */
  :: atomic { settleScript(c) };                /* applied and answered */
     xunsettled = 0; xcount = c; ok = 1
  fi
}

/* releaseStrays(l): with no live Held, release with the ledger's kind */
inline releaseStrays() {
  do
  :: !xheld && xcount > 0 && !xunsettled ->
     atomic { release(xkind, X, t) };
     if :: t == STILL -> xcount = (xcount > 1 -> xcount - 1 : 1) :: else -> xcount = 0 fi
  :: else -> break
  od
}

/* known(l): with no live Held, one stray is adopted (one less) */
inline known(kk) {
  if
  :: xcount == 0 || xheld -> kk = xcount
  :: else -> skip;
     if :: xcount > 1 -> releaseStrays() :: else -> skip fi;
     if
     :: xcount == 1 && !xunsettled -> kk = 0
     :: else -> kk = xcount   /* never reached: X has at most one stray */
     fi
  fi
}

inline takeTurn() { atomic { !turn -> turn = 1 } }
inline giveTurn() { turn = 0 }

proctype Settler() {                            /* finishLater, settleLater */
  bool ok;
  takeTurn();
  if :: !xunsettled -> goto out :: else -> skip fi;   /* settled by the next turn's holder */
  do
  :: xunsettled -> settle(ok); if :: !ok -> goto out :: else -> skip fi
  :: else -> break
  od;
  releaseStrays();
out:
  giveTurn()
}

/* the copy of X's first request still on the wire: runs once, or never */
active proctype Wire() {
  byte wr, wn;
  (K1 != 2);
end:                                            /* a copy that never arrives: lost */
  atomic { inflight -> inflight = 0; acquire(K1, X, inknown, rec1, wr, wn) }
}

active proctype Xo() {
  bool ok;
  byte kind2, i;
  atomic {
#ifdef K1READ
    K1 = READ;                                  /* R3-3's direction only */
#else
    if :: K1 = PLAIN :: K1 = READ fi;
#endif
#ifdef K1READ
    kind2 = PLAIN;
#else
    if :: kind2 = 1 - K1 :: kind2 = K1 fi       /* the second Lock: the other kind, or the same */
#endif
  };
  /* the first Lock, as K1: its reply is lost, or it is answered */
  takeTurn();
  xkind = K1;                                   /* a new ledger: dropOtherKind has nothing */
  known(k);
  if
  :: atomic { acquire(K1, X, k, rec1, res, c) };   /* answered */
     if
     :: res == ACQ -> xcount = c; xheldkind = K1; xheld = 1; check()
     :: else -> skip
     fi
  :: atomic { acquire(K1, X, k, rec1, res, c) };   /* ran; its reply lost, ctx ended */
     xunsettled = 1
  :: inflight = 1; inknown = k;                 /* still on the wire, ctx ended */
     xunsettled = 1
  fi;
  giveTurn();
  if :: xunsettled -> settling = 1; run Settler() :: else -> skip fi;
  if
  :: xheld ->                                   /* Unlock */
     takeTurn();
     xheld = 0;
     atomic { release(xkind, X, res) };
     xcount = 0;
     giveTurn()
  :: else -> skip
  fi;
  /* the second Lock, as the other kind: NTRY attempts */
  i = 0;
  do
  :: i == NTRY -> break
  :: i < NTRY ->
     i++;
     takeTurn();
#ifdef OLDATTEMPT
     assert(!xheld);                            /* else ErrInvalid (not reached) */
     xkind = kind2;
     if
     :: xunsettled -> settle(ok); if :: !ok -> giveTurn(); goto next :: else -> skip fi
     :: else -> skip
     fi;
#else
     if
     :: xkind != kind2 ->
        assert(!xheld);                         /* else ErrInvalid (not reached) */
        if                                      /* dropOtherKind */
        :: xunsettled || xcount > 0 ->
           if
           :: xunsettled -> settle(ok)
           :: else -> ok = 1   /* never reached: the settler releases strays in the turn it settles */
           fi;
           if :: ok -> releaseStrays() :: else -> skip fi;
           if
           :: xunsettled || xcount > 0 -> giveTurn(); goto next   /* ErrUnavailable */
           :: else -> skip
           fi
        :: else -> skip
        fi
     :: else -> skip
     fi;
     xkind = kind2;
     if :: xunsettled -> settle(ok); if :: !ok -> giveTurn(); goto next :: else -> skip fi :: else -> skip fi;
#endif
     known(k);
     atomic { acquire(kind2, X, k, 0, res, c) };
     if
     :: res == ACQ ->
        xcount = c; xheldkind = kind2; xheld = 1; check();
        giveTurn();
        /* critical section, then Unlock */
        takeTurn();
        xheld = 0;
        atomic { release(xkind, X, res) };
        if :: res == STILL -> xcount = (xcount > 1 -> xcount - 1 : 1) :: else -> xcount = 0 fi;
        releaseStrays();
        giveTurn();
        break
     :: res == FEWER -> xcount = c; giveTurn()   /* never reached: see the FEWER branches of acquire */
     :: else -> giveTurn()
     fi;
next:
     skip
  od
}

/* another owner, Y, locks the name as K1, holds, unlocks */
active proctype Yo() {
  byte j = 0;
  (K1 != 2);
  do
  :: j == NTRY -> break
  :: j < NTRY ->
     j++;
     atomic {
       acquire(K1, Y, 0, 0, yres, yc);
       if :: yres == ACQ -> yheld = 1; check() :: else -> skip fi
     };
     if
     :: yheld ->
        atomic { yheld = 0; release(K1, Y, yres) };
        break
     :: else -> skip
     fi
  od
}
