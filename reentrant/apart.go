package reentrant

import (
	"context"

	"github.com/redis/rueidis"
)

// DoMultiApart sends cmds in one round trip on a connection of their own,
// taken from rueidis's pool of dedicated connections (and given back), not
// on the connection the callers' requests share: background work (the
// watchdog's renewals, the latch cleaner's deletions) sent there while a
// caller's request is in flight would switch that connection to
// pipelining for good, which costs every later request of a lone caller
// two goroutine handoffs (bench/: the floor takes about 1.5 times as long
// on a rueidis connection in that mode). In a Redis Cluster, where a batch
// spans slots and so masters, they go out on the client as before.
//
// rueidis waits for a free dedicated connection without a bound (its
// Dedicated takes one with context.Background): use it only on a client
// whose pool of dedicated connections (BlockingPoolSize) nothing else can
// use up, such as one lock.New made.
func DoMultiApart(ctx context.Context, c rueidis.Client, cmds ...rueidis.Completed) []rueidis.RedisResult {
	if c.Mode() == rueidis.ClientModeCluster {
		return c.DoMulti(ctx, cmds...)
	}
	var res []rueidis.RedisResult
	_ = c.Dedicated(func(d rueidis.DedicatedClient) error {
		res = d.DoMulti(ctx, cmds...)
		return nil
	})
	return res
}
