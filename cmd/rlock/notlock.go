package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What is a lock's key, and what is not.
//
// A lock's hash is what Redisson's lock kinds (and rlock's) write under
// the lock's name: fields "<client id>:<integer>" with integer hold counts
// (RLock, the spin, fair and fenced locks), or a read-write lock's field
// "mode" ("read" or "write") with readers "<client id>:<integer>" and
// writers "<client id>:<integer>:write", integer counts too. Any other
// hash (an application's record, HSET user:1 name bob age 3) is not a
// lock: its fields are no holders, and deleting it would delete someone's
// data. The other keys of the lock kinds are parts of a lock: the fair
// lock's queue and timeouts, a read lock hold's rwlock_timeout key, the
// fenced lock's token counter, an unlock's latch.

var (
	// holderField is a holder's field: a client id, ':', an integer.
	holderField = regexp.MustCompile(`^.+:-?[0-9]+$`)
	// writerField is a read-write lock's writer: a holder field, ":write".
	writerField = regexp.MustCompile(`^.+:-?[0-9]+:write$`)
	// rwTimeoutKey is a read lock hold's timeout key:
	// "{name}:<client id>:<integer>:rwlock_timeout:<n>".
	rwTimeoutKey = regexp.MustCompile(`^(.*):.+:-?[0-9]+:rwlock_timeout:[0-9]+$`)
)

// hashLayout reads a hash under a lock's name: mode is a read-write
// lock's ("read" or "write"; "" for the other kinds), and notLock, when
// not empty, says why the hash is no lock at all.
func hashLayout(fields map[string]string) (mode, notLock string) {
	mode, rw := fields["mode"]
	if rw && mode != "read" && mode != "write" {
		return "", fmt.Sprintf("a hash whose field \"mode\" is %q, where a read-write lock has read or write", clip(mode))
	}
	var bad []string
	for f, v := range fields {
		if f == "mode" {
			continue
		}
		_, err := strconv.ParseInt(v, 10, 64)
		ok := err == nil && (holderField.MatchString(f) || rw && writerField.MatchString(f))
		if !ok {
			bad = append(bad, clip(f))
		}
	}
	if len(bad) == 0 {
		return mode, ""
	}
	sort.Strings(bad)
	if len(bad) > 5 {
		bad = append(bad[:5], fmt.Sprintf("and %d more", len(bad)-5))
	}
	return "", fmt.Sprintf("a hash with fields %s, which are not a lock's holders (those are \"<client id>:<integer>\" with integer values)", strings.Join(bad, ", "))
}

// partOf tells the keys of a lock other than its hash from its name and
// Redis type: which lock (its name, "" when the key does not say) and
// what part of it the key is. ok is false for any other key.
func partOf(key, typ string) (name, role string, ok bool) {
	braced := func(rest string) string {
		if strings.HasPrefix(rest, "{") && strings.HasSuffix(rest, "}") && strings.Count(rest, "{") == 1 {
			return rest[1 : len(rest)-1]
		}
		return rest // a name with a '{' of its own is used as is
	}
	firstBraced := func(rest string) string {
		if i := strings.IndexByte(rest, '}'); strings.HasPrefix(rest, "{") && i > 0 {
			return rest[1:i]
		}
		return ""
	}
	switch {
	case typ == "list" && strings.HasPrefix(key, "redisson_lock_queue:"):
		return braced(strings.TrimPrefix(key, "redisson_lock_queue:")), "the fair lock's queue of waiters", true
	case typ == "zset" && strings.HasPrefix(key, "redisson_lock_timeout:"):
		return braced(strings.TrimPrefix(key, "redisson_lock_timeout:")), "the fair lock's waiter timeouts", true
	case typ == "string" && strings.HasPrefix(key, "redisson_lock_token:"):
		return braced(strings.TrimPrefix(key, "redisson_lock_token:")), "the fenced lock's token counter", true
	case typ == "string" && strings.HasPrefix(key, "redisson_unlock_latch:"):
		return firstBraced(strings.TrimPrefix(key, "redisson_unlock_latch:")), "an unlock's latch (Redisson keeps it a few seconds)", true
	case typ == "string" && rwTimeoutKey.MatchString(key):
		return firstBraced(key), "a read lock hold's timeout (read-write lock)", true
	}
	return "", "", false
}

// clip shortens what a message quotes of a key, a field or a value.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + fmt.Sprintf("... (%d bytes)", len(s))
}

// shellQuote quotes s for a shell command line when it needs it.
func shellQuote(s string) string {
	safe := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// maxNameLen is the longest lock name, as package lock takes it.
const maxNameLen = 8 << 10

// checkName refuses, for cmd, a name package lock refuses (empty, longer
// than 8 KiB, not UTF-8), echoing it clipped: run and inspect alike.
func checkName(cmd, name string) error {
	switch {
	case name == "":
		return usagef("%s: the lock name is empty", cmd)
	case len(name) > maxNameLen:
		return usagef("%s: lock name %q: %d bytes, more than %d", cmd, clip(name), len(name), maxNameLen)
	case !utf8.ValidString(name):
		return usagef("%s: lock name %q is not UTF-8, as Redisson's names are", cmd, clip(name))
	}
	return nil
}
