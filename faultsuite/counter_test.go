package faultsuite

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/reentrant"
)

// readTimeout bounds one count read: a stopped master does not answer, and
// the read is then left out.
const readTimeout = 100 * time.Millisecond

// leftoverReadTimeout bounds the read of a closed Client's leftovers,
// once the master runs again (closestopped_test.go).
const leftoverReadTimeout = time.Second

// direct is one connection per master that bypasses the proxy (so no
// injected fault, partition included, touches it): the suite's view of
// what Redis holds.
type direct struct {
	conns []rueidis.Client
}

func newDirect(t *testing.T, servers []*integration.Server) *direct {
	t.Helper()
	d := &direct{}
	for _, s := range servers {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress:      []string{s.DirectAddr()},
			Password:         s.Password(),
			DisableCache:     true,
			ConnWriteTimeout: time.Second,
			Dialer:           net.Dialer{Timeout: readTimeout},
		})
		if err != nil {
			t.Fatalf("direct connection to %s: %v", s.DirectAddr(), err)
		}
		t.Cleanup(c.Close)
		d.conns = append(d.conns, c)
	}
	return d
}

// counter reads the hold counts of one lock on the masters of a
// topology. Owners are unique in the process, so a field is found by its
// owner whatever Client (client id) made it.
type counter struct {
	names  []string // the round's names (lockNames)
	conns  []rueidis.Client
	quorum int
}

func (d *direct) counter(name string, topo topology) *counter {
	return &counter{names: lockNames(name, topo), conns: d.conns[:topo.masters], quorum: topo.quorum}
}

func (c *counter) single() bool { return len(c.conns) == 1 }

// countOn reads owner's hold count of the round's name i on master m.
func (c *counter) countOn(m, i int, owner uint64) (int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	kv, err := c.conns[m].Do(ctx, c.conns[m].B().Hgetall().Key(c.names[i]).Build()).AsStrMap()
	if err != nil {
		return 0, false
	}
	suffix := ":" + strconv.FormatUint(owner, 10)
	for f, v := range kv {
		if strings.HasSuffix(strings.TrimSuffix(f, ":write"), suffix) { // a read-write lock's writer: "...:<owner>:write"
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, true
}

// count reads owner's count of name i on a single master.
func (c *counter) count(i int, owner uint64) (int, bool) { return c.countOn(0, i, owner) }

// held reads whether owner still holds the lock of name i: on a single master its
// count is above 0; on RedLock a quorum of masters has its field. known
// is false when too few masters answered to tell. n is the count on a
// single master.
func (c *counter) held(i int, owner uint64) (held, known bool, n int) {
	if c.single() {
		n, ok := c.count(i, owner)
		return n > 0, ok, n
	}
	var mu sync.Mutex
	yes, no := 0, 0
	var wg sync.WaitGroup
	for m := range c.conns {
		wg.Go(func() {
			n, ok := c.countOn(m, i, owner)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok && n > 0:
				yes++
			case ok:
				no++
			}
		})
	}
	wg.Wait()
	switch {
	case yes >= c.quorum:
		return true, true, 0
	case no > len(c.conns)-c.quorum:
		return false, true, 0
	}
	return false, false, 0
}

// leaveWithin is how long after the workers' calls returned a fair
// queue may still hold their waiters: a leave whose first send failed
// during a fault is finished by a settler in the background.
const leaveWithin = 3 * time.Second

// leftQueued returns how many waiters the fair lock name's queue on the
// first master still holds leaveWithin after the calls returned (0 as
// soon as it is empty).
func (d *direct) leftQueued(ctx context.Context, name string) int64 {
	c := d.conns[0]
	deadline := time.Now().Add(leaveWithin)
	for {
		n, err := c.Do(ctx, c.B().Llen().Key(reentrant.FairQueueName(name)).Build()).AsInt64()
		if err == nil && n == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		time.Sleep(50 * time.Millisecond) // polling Redis: no signal tells when a background leave lands
	}
}
