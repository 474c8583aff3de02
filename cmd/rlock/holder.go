package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// Who holds a lock.
//
// A holder is a field "<client id>:<owner id>" of the lock hash, as in
// Redisson, whose client id is a random UUID per client. rlock's own
// Clients use "<host>-<pid>-<16 hex digits>" instead (cliClientID): still a
// valid Redisson field — Redisson never parses it, and it has no ':' —
// but one that tells an operator which machine and process hold the lock.
// inspect and run's messages decode it (parseClientID); any other id
// (Redisson's UUIDs, a program's lock.Config.ClientID) is shown as is.

// randomIDLen is the length of the random part of a CLI client id: 64
// bits, so that two Clients never share an id.
const randomIDLen = 16

// cliClientID returns a new client id "<host>-<pid>-<random>" for one of
// this process's Clients.
func cliClientID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [randomIDLen / 2]byte
	_, _ = rand.Read(b[:])
	return sanitizeHost(host) + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// sanitizeHost keeps a host name's letters, digits, '.', '-' and '_' (a
// ':' would split the field in the wrong place), at most 64 of them.
func sanitizeHost(h string) string {
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	return b.String()
}

// parseClientID decodes a client id made by cliClientID: ok is false for
// any other id.
func parseClientID(id string) (host string, pid int, ok bool) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 || len(id)-i-1 != randomIDLen {
		return "", 0, false
	}
	if _, err := hex.DecodeString(id[i+1:]); err != nil {
		return "", 0, false
	}
	rest := id[:i]
	j := strings.LastIndexByte(rest, '-')
	if j <= 0 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(rest[j+1:])
	if err != nil || pid <= 0 || rest[j+1] == '+' {
		return "", 0, false
	}
	return rest[:j], pid, true
}

// splitField splits a holder field "<client id>:<owner id>" at its last
// ':'; ok is false when there is none.
func splitField(f string) (clientID, ownerID string, ok bool) {
	i := strings.LastIndexByte(f, ':')
	if i < 0 {
		return "", "", false
	}
	return f[:i], f[i+1:], true
}

// describeHolder renders a holder field for messages: the field, then
// "rlock on HOST, pid PID" when its client id says so, and whether that
// process is gone when HOST is this one.
func describeHolder(field string) string {
	id, _, _ := splitField(strings.TrimSuffix(field, ":write"))
	if host, pid, ok := parseClientID(id); ok {
		s := fmt.Sprintf("%s (rlock on host %s, pid %d", field, host, pid)
		if gone(host, pid) {
			s += ", which is gone: its lock stays until its TTL runs out"
		}
		return s + ")"
	}
	return field
}

// gone reports an rlock holder on this host whose process no longer
// exists (kill -0 answers ESRCH). A holder on another host, or one whose
// state cannot be read, is not gone.
func gone(host string, pid int) bool {
	me, err := os.Hostname()
	if err != nil || sanitizeHost(me) != host || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// anyGone reports whether one of the holders is a gone rlock process of
// this host.
func anyGone(fields []string) bool {
	for _, f := range fields {
		id, _, _ := splitField(strings.TrimSuffix(f, ":write"))
		if host, pid, ok := parseClientID(id); ok && gone(host, pid) {
			return true
		}
	}
	return false
}

// look is what one read of a lock on one master saw.
type look struct {
	addr   string
	at     time.Time // when the reply came
	fields []string  // holder fields, sorted; none when free
	// mode is a read-write lock's ("read" or "write"), "" for the other
	// kinds; notLock says why the key is not a lock (see hashLayout).
	mode    string
	notLock string
	pttl    time.Duration
	hasTTL  bool // false: the key has no expiry (PTTL -1) or no key
	err     error
}

// lookAt reads the holders and the remaining TTL of the lock name on rc,
// in one round trip. It only reads.
func lookAt(ctx context.Context, rc rueidis.Client, addr, name string) look {
	b := rc.B()
	res := rc.DoMulti(ctx, b.Hgetall().Key(name).Build(), b.Pttl().Key(name).Build())
	l := look{addr: addr, at: time.Now()}
	all, err := res[0].AsStrMap()
	if err != nil {
		l.err = err
		return l
	}
	if l.mode, l.notLock = hashLayout(all); l.notLock != "" {
		return l // no holders: no lock
	}
	for f := range all {
		if f != "mode" { // a read-write lock's mode holds nothing
			l.fields = append(l.fields, f)
		}
	}
	sort.Strings(l.fields)
	ms, err := res[1].AsInt64()
	if err != nil {
		l.err = err
		return l
	}
	l.hasTTL = ms >= 0
	l.pttl = time.Duration(ms) * time.Millisecond
	return l
}

// holders renders the holders seen, or "nobody".
func (l look) holders() string {
	if len(l.fields) == 0 {
		return "nobody (it was just released)"
	}
	hs := make([]string, len(l.fields))
	for i, f := range l.fields {
		hs[i] = describeHolder(f)
		switch {
		case l.mode == "":
		case strings.HasSuffix(f, ":write"):
			hs[i] = "writer " + hs[i]
		default:
			hs[i] = "reader " + hs[i]
		}
	}
	return strings.Join(hs, " and ")
}

// sameHolders reports whether two looks saw the same holders.
func sameHolders(a, b look) bool {
	if len(a.fields) != len(b.fields) {
		return false
	}
	for i := range a.fields {
		if a.fields[i] != b.fields[i] {
			return false
		}
	}
	return true
}

// renewTolerance absorbs the round trips between two looks when telling
// a renewed lease from one running out.
const renewTolerance = 200 * time.Millisecond

// watchedEnough is how long two looks must be apart for "not renewed"
// to mean something.
const watchedEnough = time.Second

// leaseNote says what the holder's TTL means, from the first and the
// last look at it: whether the lease is renewed (then the TTL is no
// measure of when the lock frees), running out, or not known yet. A TTL
// is never presented as the time left for a lease that may be renewed.
func leaseNote(first, last look) string {
	switch {
	case last.err != nil:
		return "its lease could not be read: " + last.err.Error()
	case len(last.fields) == 0:
		return ""
	case !last.hasTTL:
		return "its key has no TTL: it never expires, and stays until its holder releases it or someone deletes it (see rlock inspect)"
	}
	if anyGone(last.fields) {
		return fmt.Sprintf("it expires in %v", roundDur(last.pttl))
	}
	span := last.at.Sub(first.at)
	if first.err == nil && first.hasTTL && sameHolders(first, last) && span > 0 {
		if last.pttl > first.pttl-span+renewTolerance {
			return fmt.Sprintf("its lease is being renewed (TTL %v, up from %v %v earlier): it stays held until its holder releases it",
				roundDur(last.pttl), roundDur(first.pttl), roundDur(span))
		}
		// A watchdog renews every third of its lease, so before the TTL
		// seen first has lost half: a watch shorter than that cannot tell
		// a renewed lease from a fixed one.
		if span >= watchedEnough && span > first.pttl/2 {
			return fmt.Sprintf("its lease was not renewed in the %v rlock watched: it expires in %v unless renewed or released",
				roundDur(span), roundDur(last.pttl))
		}
		if span >= watchedEnough {
			return fmt.Sprintf("TTL %v; no renewal seen in the %v rlock watched, too short to tell: a watchdog renews every third of its lease (10s by default), and may keep it for as long as its holder runs",
				roundDur(last.pttl), roundDur(span))
		}
	}
	return fmt.Sprintf("TTL %v, which a watchdog may keep renewing for as long as its holder runs", roundDur(last.pttl))
}

// roundDur rounds d for messages: to 0.1s, 1ms below a second, 10µs
// below 10ms.
func roundDur(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond)
	}
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
