// Package oneline joins and wraps errors so that they print on one line
// with a single "rlock: " prefix, for packages lock and multilock: their
// errors wrap each other's (and errors.Join separates with newlines), and
// a log line must stay one line.
package oneline

import (
	"errors"
	"fmt"
	"strings"
)

const prefix = "rlock: "

// Tidy makes s one line with a single "rlock: " prefix.
func Tidy(s string) string {
	s = strings.ReplaceAll(s, "\n", ": ")
	if i := strings.Index(s, prefix); i >= 0 {
		s = s[:i+len(prefix)] + strings.ReplaceAll(s[i+len(prefix):], prefix, "")
	}
	return s
}

// chain is errors joined on one line: it matches each of them.
type chain struct {
	msg  string // a message of its own before the errors, if any
	errs []error
}

func (e *chain) Error() string {
	parts := make([]string, 0, len(e.errs)+1)
	if e.msg != "" {
		parts = append(parts, e.msg)
	}
	for _, err := range e.errs {
		parts = append(parts, err.Error())
	}
	return Tidy(strings.Join(parts, ": "))
}

func (e *chain) Unwrap() []error { return e.errs }

// Join is errors.Join printed on one line; nil when every err is nil.
//
// An error already in the chain of one kept before it (errors.Is: a
// sentinel such as context.DeadlineExceeded joined again by each layer)
// is left out: what errors.Is finds is the same, and the text says it
// once.
func Join(errs ...error) error {
	var kept []error
	for _, err := range errs {
		if err != nil && !within(kept, err) {
			kept = append(kept, err)
		}
	}
	switch len(kept) {
	case 0:
		return nil
	case 1:
		if _, ok := kept[0].(*chain); ok {
			return kept[0]
		}
	}
	return &chain{errs: kept}
}

// Wrapf is fmt.Errorf("rlock: format: %w", err) printed on one line.
func Wrapf(err error, format string, args ...any) error {
	return &chain{msg: prefix + fmt.Sprintf(format, args...), errs: []error{err}}
}

// within reports whether err is in the chain of one of kept.
func within(kept []error, err error) bool {
	for _, k := range kept {
		if errors.Is(k, err) {
			return true
		}
	}
	return false
}
