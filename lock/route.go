package lock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/slots"
	"github.com/rlock-go/rlock/pubsub"
)

// A route names the master that owns a lock name: the Client's master
// (with Sentinel, the one rueidis follows now), or in a cluster the owner
// of the name's slot in the table last read. Its fields are set by
// newClient; table and asked are atomics.
type route struct {
	rc       rueidis.Client
	addr     string // the Client's first address
	cluster  bool
	sentinel bool
	timeout  time.Duration // one command's (Config.CommandTimeout)
	// enter and exit count a background read of the table as a call in
	// flight of the Client, which Close waits for.
	enter func() error
	exit  func()
	spawn func(f func()) // runs f on one of the Client's workers

	table atomic.Pointer[slots.Table] // a cluster's slot owners, for naming the node that answered
	asked atomic.Int64                // when the table was last asked for, unix nanoseconds
}

// at returns the address of the master that holds name: the Client's
// master (with Sentinel, the current one), or in a cluster the owner of
// name's slot as last read (the first seed when unknown).
func (r *route) at(name string) string {
	if !r.cluster {
		return r.master()
	}
	if t := r.table.Load(); t != nil {
		if a := t.Addr(pubsub.Slot(name)); a != "" {
			return a
		}
	}
	return r.addr
}

// errAt is at for an error about name: in a cluster, the slot owners are
// asked again in the background (a failover may be why it failed).
func (r *route) errAt(name string) string {
	if r.cluster {
		r.refreshSlots()
	}
	return r.at(name)
}

// refreshSlots reads the cluster's slot owners again in the background if
// they were last asked for more than a second ago. The goroutine counts
// as a call in flight, which Close waits for.
func (r *route) refreshSlots() {
	last := r.asked.Load()
	now := time.Now().UnixNano()
	if now-last < int64(time.Second) || !r.asked.CompareAndSwap(last, now) {
		return
	}
	if r.enter() != nil {
		return
	}
	r.spawn(func() {
		defer r.exit()
		r.readSlots(context.Background())
	})
}

// readSlots reads the cluster's slot table now, within ctx and one
// CommandTimeout, and reports whether it was read.
func (r *route) readSlots(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	t, err := slots.Read(ctx, r.rc)
	if err != nil {
		return false
	}
	r.table.Store(&t)
	r.asked.Store(time.Now().UnixNano())
	return true
}

// master returns the address of the Client's master: with Sentinel, the
// one rueidis talks to now.
func (r *route) master() string {
	if r.sentinel {
		if a := firstNode(r.rc); a != "" {
			return a
		}
	}
	return r.addr
}
