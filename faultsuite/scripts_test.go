package faultsuite

import (
	"slices"
	"strings"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/reentrant"
)

// The scripts a lost request, a lost reply or a delayed reply hits, by
// role. This is the one file that names the scripts of one rlock version:
// to run the suite against another version (see docs/safety.md, "Teeth"),
// list that version's scripts here.
var scriptsByRole = map[string][]*reentrant.Script{
	"acquire": {reentrant.AcquireCountedScript, reentrant.AcquireWriteScript, reentrant.AcquireReadScript},
	"release": {reentrant.ReleaseScript, reentrant.ReleaseWriteScript, reentrant.ReleaseReadScript},
	"renew":   {reentrant.RenewScript, reentrant.RenewReadScript},
}

// scriptMatcher matches the EVALSHA (or its EVAL fallback) of a script of
// role on the lock called name.
func scriptMatcher(role, name string) integration.Matcher {
	scripts := scriptsByRole[role]
	return integration.MatchFunc(func(cmd []string) bool {
		if len(cmd) < 2 || !slices.ContainsFunc(cmd[2:], func(a string) bool { return strings.Contains(a, name) }) {
			return false
		}
		switch {
		case strings.EqualFold(cmd[0], "EVALSHA"):
			return slices.ContainsFunc(scripts, func(s *reentrant.Script) bool { return strings.EqualFold(cmd[1], s.SHA1()) })
		case strings.EqualFold(cmd[0], "EVAL"):
			return slices.ContainsFunc(scripts, func(s *reentrant.Script) bool { return cmd[1] == s.Source() })
		}
		return false
	})
}
