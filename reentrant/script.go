package reentrant

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"

	"github.com/redis/rueidis"
)

//go:embed release.lua
var releaseSrc string

//go:embed renew.lua
var renewSrc string

//go:embed acquire_counted.lua
var acquireCountedSrc string

//go:embed settle.lua
var settleSrc string

//go:embed force_unlock.lua
var forceUnlockSrc string

// The scripts, each run by EVALSHA with an EVAL fallback on NOSCRIPT.
var (
	ReleaseScript     = newScript(releaseSrc)
	RenewScript       = newScript(renewSrc)
	ForceUnlockScript = newScript(forceUnlockSrc)
	// AcquireCountedScript is rlock's acquire: Redisson's layout, with an
	// answer that belongs to one request (see AcquireRequest).
	AcquireCountedScript = newScript(acquireCountedSrc)
	// SettleScript settles a request whose answer was lost (see Settle).
	SettleScript = newScript(settleSrc)
)

// Script is a Lua script with its SHA1, sent by EVALSHA.
type Script struct {
	src string
	sha string
}

// newScript returns the Script for the Lua source src.
func newScript(src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{src: src, sha: hex.EncodeToString(sum[:])}
}

// SHA1 returns the script's SHA1 in hex, as EVALSHA wants it.
func (s *Script) SHA1() string { return s.sha }

// Source returns the script's Lua source.
func (s *Script) Source() string { return s.src }

// EvalSHA builds an EVALSHA command of the script. Build many of them and
// send them with one DoMulti to run them in one round trip.
func (s *Script) EvalSHA(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// Eval builds an EVAL command carrying the script's source.
func (s *Script) Eval(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// Run sends EVALSHA and, only when the server answers NOSCRIPT (the script
// did not run), EVAL. It never resends after any other failure: acquire and
// release change a count, so a blind retry could apply them twice.
func (s *Script) Run(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	res := c.Do(ctx, s.EvalSHA(c, keys, args))
	if IsNoScript(res.Error()) {
		res = c.Do(ctx, s.Eval(c, keys, args))
	}
	return res
}

// IsNoScript reports whether err is the server's NOSCRIPT answer.
func IsNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// Load sends SCRIPT LOAD for the given scripts (default: rlock's acquire
// and settle, release, renew, force unlock, and the read-write lock's) in
// one round trip, so that their first EVALSHA does not need the NOSCRIPT
// fallback.
func Load(ctx context.Context, c rueidis.Client, scripts ...*Script) error {
	if len(scripts) == 0 {
		scripts = []*Script{AcquireCountedScript, SettleScript, ReleaseScript, RenewScript, ForceUnlockScript,
			AcquireReadScript, AcquireWriteScript, ReleaseReadScript, ReleaseWriteScript, RenewReadScript, ForceUnlockRWScript}
	}
	cmds := make(rueidis.Commands, len(scripts))
	for i, s := range scripts {
		cmds[i] = c.B().ScriptLoad().Script(s.src).Build()
	}
	for _, res := range c.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return err
		}
	}
	return nil
}
