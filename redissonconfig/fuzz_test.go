package redissonconfig_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/redissonconfig"
)

// FuzzLoad: any input loads, or is refused with ErrInvalid; never a
// panic, never an error of another kind.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"singleServerConfig: {address: 'redis://u:p@h:1/2'}\nlockWatchdogTimeout: 3000\n",
		"sentinelServersConfig:\n  masterName: m\n  sentinelAddresses: ['rediss://h:1']\nsslVerificationMode: CA_ONLY\n",
		"clusterServersConfig: {nodeAddresses: ['redis://[::1]:1'], shardedSubscriptionMode: ON}\nnameMapper: !<x.Y> {}\n",
		"a: &x {b: 1}\nsingleServerConfig: *x\n",
		"singleServerConfig: {address: '${A:-redis://h:1}', timeout: 99999999999999999999}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, yml string) {
		cfg, ws, err := redissonconfig.Load([]byte(yml), redissonconfig.WithNameMapper("x.Y", strings.ToUpper))
		if err != nil {
			if !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Load: %v, not ErrInvalid", err)
			}
			return
		}
		if len(cfg.Addrs) == 0 {
			t.Fatalf("a config without addresses was accepted: %q", yml)
		}
		for _, w := range ws {
			if w.Line < 1 {
				t.Fatalf("a warning without a line: %v", w)
			}
		}
	})
}
