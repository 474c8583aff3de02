package reentrant

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Sync asks the master, right after a request, to wait until Replicas of
// its replicas have acknowledged it, for up to Timeout: the request and a
// WAIT go out together on one connection (WAIT counts the writes of its
// own connection). The zero Sync sends no WAIT. This is Redisson's
// checkLockSyncedSlaves (Timeout is its slavesSyncTimeout).
type Sync struct {
	Replicas int
	Timeout  time.Duration
}

// WaitLag is how late Redis may answer a WAIT that timed out unanswered
// by its replicas: the server checks blocked clients' timeouts on its
// event loop, which an idle server runs hz times a second (10 by
// default), so the answer comes up to 1/hz after the timeout. On
// redis-server 7.0.15, WAIT 1 1 on an idle server with no replica answers
// after 80–90 ms. A WAIT that replicas acknowledge answers at once.
const WaitLag = 100 * time.Millisecond

// Extra is how much longer than its own round trip a request sent with s
// may take to be answered: Timeout plus WaitLag, or 0 when no WAIT goes
// with it.
func (s Sync) Extra() time.Duration {
	if s.Replicas <= 0 {
		return 0
	}
	return s.Timeout + WaitLag
}

// runSynced sends the script with keys and args, followed by the commands
// extra builds (writes, which make a WAIT after a request that wrote
// nothing this time still cover what an earlier copy wrote) and WAIT, on
// one connection. It returns the script's reply and how many replicas
// acknowledged: -1 when no WAIT was sent or its answer is not known.
// Every send builds its commands anew: rueidis recycles a command once it
// was sent, so a command must never be sent twice.
func (s Sync) runSynced(ctx context.Context, c rueidis.Client, sc *Script, keys, args []string, extra func() []rueidis.Completed) (rueidis.RedisResult, int) {
	if s.Replicas <= 0 {
		return sc.Run(ctx, c, keys, args), -1
	}
	send := func(eval rueidis.Completed) []rueidis.RedisResult {
		cmds := rueidis.Commands{eval}
		if extra != nil {
			cmds = append(cmds, extra()...)
		}
		cmds = append(cmds, c.B().Wait().Numreplicas(int64(s.Replicas)).Timeout(s.Timeout.Milliseconds()).Build())
		return c.DoMulti(ctx, cmds...)
	}
	res := send(sc.EvalSHA(c, keys, args))
	if IsNoScript(res[0].Error()) {
		res = send(sc.Eval(c, keys, args))
	}
	acked, err := res[len(res)-1].AsInt64()
	if err != nil {
		return res[0], -1
	}
	return res[0], int(acked)
}
