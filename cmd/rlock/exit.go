package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/lock"
)

// Exit codes, in one place. Where a code has a meaning in sysexits.h it
// keeps it; the command's own status passes through unchanged, and a
// command killed by a signal gives 128+signo, as in a shell.
const (
	// exitOK: success (and, for run, a command that exited 0).
	exitOK = 0
	// exitError: inspect or demo failed (Redis error, broken invariant).
	exitError = 1
	// exitUsage: bad usage — unknown flag, missing or empty name, bad
	// duration, no command, an address given twice (EX_USAGE).
	exitUsage = 64
	// exitDataErr: the key under the lock's name is not a lock: inspect
	// found another type, run got WRONGTYPE (EX_DATAERR).
	exitDataErr = 65
	// exitUnavailable: Redis could not be reached or did not answer; with
	// several masters, fewer than the quorum could (EX_UNAVAILABLE).
	exitUnavailable = 69
	// exitSoftware: an internal error that fits nowhere else
	// (EX_SOFTWARE).
	exitSoftware = 70
	// exitConflict: run did not acquire the lock within --wait: it was
	// busy, or on several masters the quorum was not had (EX_TEMPFAIL:
	// try again later). --conflict-exit-code changes it.
	exitConflict = 75
	// exitLost: run lost the lock while the command ran (several masters:
	// fewer than the quorum still held it); the command was stopped
	// (EX_PROTOCOL, the closest: the lock's contract broke).
	exitLost = 76
	// exitAuth: Redis refused the credentials; with several masters, the
	// quorum was not reached and one of them refused them (EX_NOPERM).
	exitAuth = 77
	// exitCannotExec: the command exists but could not be started
	// (as env(1) and timeout(1)).
	exitCannotExec = 126
	// exitNotFound: the command was not found (as env(1), timeout(1)).
	exitNotFound = 127
	// exitSignalBase + signo: the command died of that signal, or rlock
	// was interrupted by it while waiting for the lock.
	exitSignalBase = 128
)

// exitError is an error that decides rlock's exit status. Its message,
// if any, is printed on stderr prefixed "rlock: ".
type exitErr struct {
	code int
	err  error // nil: exit silently with code
	// synopsis: a usage mistake (a flag, an argument), after which the
	// command's synopsis is shown; not for a set-up that failed.
	synopsis bool
}

func (e *exitErr) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitErr) Unwrap() error { return e.err }

// exitWith wraps err so that rlock exits with code.
func exitWith(code int, err error) error { return &exitErr{code: code, err: err} }

// usagef reports bad usage: exit 64.
func usagef(format string, args ...any) error {
	return &exitErr{code: exitUsage, err: fmt.Errorf(format, args...), synopsis: true}
}

// linesError is a message of several lines, printed as they are: the
// first after "rlock: ", the others below it.
type linesError struct{ msg string }

func (e *linesError) Error() string { return e.msg }

// codeOf maps an error from package lock (or one wrapped by exitWith) to
// an exit code. conflict is the code for ErrNotAcquired.
func codeOf(err error, conflict int) int {
	var ee *exitErr
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, lock.ErrInvalid):
		return exitUsage
	case errors.Is(err, lock.ErrAuth):
		return exitAuth
	case errors.Is(err, lock.ErrLockLost):
		return exitLost
	case errors.Is(err, lock.ErrNotLock):
		return exitDataErr
	case errors.Is(err, lock.ErrNotAcquired):
		return conflict
	case errors.Is(err, lock.ErrUnavailable):
		return exitUnavailable
	}
	return exitSoftware
}

// withHint adds to err what to do about it, for the errors that come
// from a wrong set-up rather than from the lock: MOVED (a cluster node
// given without --cluster), WRONGTYPE (the name's key holds something
// else), a server certificate that does not verify.
func withHint(err error) error {
	var cv *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var caErr x509.UnknownAuthorityError
	switch {
	case errors.As(err, &hostErr):
		return fmt.Errorf("%w: the certificate does not carry the name dialled: give the name it carries with --tls-server-name", err)
	case errors.As(err, &caErr):
		return fmt.Errorf("%w: give the CA that signed it with --tls-ca", err)
	case errors.As(err, &cv):
		return fmt.Errorf("%w: give the CA that signed it with --tls-ca, or the name it carries with --tls-server-name", err)
	case isMoved(err):
		return fmt.Errorf("%w: the address is a node of a Redis Cluster, and another node holds this key: add --cluster", err)
	case errors.Is(err, lock.ErrNotLock):
		return fmt.Errorf("%w: rlock inspect shows what the key holds", err)
	}
	return err
}

// connectHint adds to a failure to connect (tlsOn: with TLS) what a TLS
// mismatch looks like: a TLS server resets a plain client, and a plain
// server never answers a TLS handshake.
func connectHint(err error, tlsOn bool) error {
	var cv *tls.CertificateVerificationError
	var re tls.RecordHeaderError
	msg := err.Error()
	switch {
	case !errors.Is(err, lock.ErrUnavailable) && !isNetError(err), errors.As(err, &cv):
	case !tlsOn && (strings.Contains(msg, "connection reset by peer") || strings.HasSuffix(msg, "EOF")):
		return fmt.Errorf("%w: the server may expect TLS: use rediss:// or --tls", err)
	case tlsOn && (errors.As(err, &re) || strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "first record does not look like a TLS handshake")):
		return fmt.Errorf("%w: the server may not speak TLS: use redis:// without --tls and the --tls-* flags", err)
	}
	return err
}

// isMoved reports a MOVED or ASK redirection: the server is a Redis
// Cluster node, and the key's slot is served by another.
func isMoved(err error) bool {
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		_, moved := re.IsMoved()
		_, ask := re.IsAsk()
		return moved || ask
	}
	return false
}

// commandStatus is the exit status a shell would report for a command
// that ended with err from exec.Cmd.Wait: its exit code, or 128+signo
// when a signal killed it.
func commandStatus(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitSignalBase + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitSoftware
}

// report prints err on w prefixed "rlock: " (unless package lock already
// prefixed it) and returns the exit code for it.
func report(w io.Writer, err error, conflict int) int {
	code := codeOf(err, conflict)
	var ee *exitErr
	if errors.As(err, &ee) && ee.err == nil {
		return code
	}
	var le *linesError
	if errors.As(err, &le) {
		fmt.Fprintln(w, "rlock: "+strings.TrimPrefix(err.Error(), "rlock: "))
		return code
	}
	fmt.Fprintln(w, prefixed(err.Error()))
	return code
}

// Texts of Redis and rueidis that prefixed rewrites: a script's SHA and
// line say nothing to a user; rueidis's HELLO explanation of NOAUTH says
// nothing of what to do; the library's field name is a flag here.
var (
	scriptWhere = regexp.MustCompile(` ?script: [0-9a-f]{40}, on @user_script:[0-9]+\.`)
	noAuth      = regexp.MustCompile(`NOAUTH (HELLO must be called[^:;]*|Authentication required\.?)`)
	rewrites    = strings.NewReplacer("Cluster set, but ", "--cluster given, but ")
)

// libraryPrefix is where an error of package lock (or another of rlock's
// packages) starts inside a message: at its start, or wrapped after ": ".
var libraryPrefix = regexp.MustCompile(`(^|: )rlock: `)

// prefixed renders msg as one line starting with "rlock: ": errors
// joined by package lock span lines and repeat the prefix. Only the
// prefix of the errors it holds is dropped, never a "rlock: " inside
// their text ("not supported by rlock: use ...").
func prefixed(msg string) string {
	msg = scriptWhere.ReplaceAllString(msg, "")
	msg = noAuth.ReplaceAllLiteralString(msg, "NOAUTH: the server needs a password: set $"+envPassword+" (or --password)")
	msg = rewrites.Replace(msg)
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		lines[i] = libraryPrefix.ReplaceAllString(l, "$1")
	}
	return "rlock: " + strings.Join(lines, ": ")
}
