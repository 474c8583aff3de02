package reentrant_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/reentrant"
)

var srv *integration.Server

func TestMain(m *testing.M) {
	integration.Main(m, 1, integration.Options{}, func(s []*integration.Server) { srv = s[0] })
}

func client(t testing.TB) rueidis.Client {
	t.Helper()
	rc := integration.NewClient(t, srv.DirectAddr())
	return rc
}

func bg() context.Context { return context.Background() }

func TestNames(t *testing.T) {
	cases := []struct{ got, want string }{
		{reentrant.ChannelName("orders:42"), "redisson_lock__channel:{orders:42}"},
		{reentrant.ChannelName("user:{7}:cart"), "redisson_lock__channel:user:{7}:cart"},
		{reentrant.TokenName("a"), "redisson_lock_token:{a}"},
		{reentrant.LatchName("a", "00ff"), "redisson_unlock_latch:{a}:00ff"},
		{reentrant.TokenName("x{y}"), "redisson_lock_token:x{y}"},
		{reentrant.Field("0b4f8c5e-1111-4222-8333-444455556666", 17), "0b4f8c5e-1111-4222-8333-444455556666:17"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if id := reentrant.NewClientID(); !uuid.MatchString(id) {
		t.Errorf("client id %q is not a lowercase v4 UUID", id)
	}
	if id := reentrant.NewRequestID(); !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("request id %q is not 32 hex characters", id)
	}
	if reentrant.NewClientID() == reentrant.NewClientID() || reentrant.NewRequestID() == reentrant.NewRequestID() {
		t.Error("ids repeat")
	}
}

// The SHA1s rlock sends by EVALSHA are the ones Redis computes.
func TestScriptSHAsMatchRedis(t *testing.T) {
	rc := client(t)
	for _, s := range []*reentrant.Script{reentrant.AcquireCountedScript, reentrant.SettleScript, reentrant.ReleaseScript, reentrant.RenewScript, reentrant.ForceUnlockScript, reentrant.FenceRaiseScript,
		reentrant.AcquireReadScript, reentrant.AcquireWriteScript, reentrant.ReleaseReadScript, reentrant.ReleaseWriteScript, reentrant.RenewReadScript, reentrant.ForceUnlockRWScript} {
		sha, err := rc.Do(bg(), rc.B().ScriptLoad().Script(s.Source()).Build()).ToString()
		if err != nil || sha != s.SHA1() {
			t.Fatalf("SCRIPT LOAD = %q, %v; rlock computes %q", sha, err, s.SHA1())
		}
	}
}

// After SCRIPT FLUSH, Run falls back to EVAL once and works.
func TestRunAfterScriptFlush(t *testing.T) {
	rc := client(t)
	if err := rc.Do(bg(), rc.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	name := t.Name()
	a, err := acquire(rc, name, "f:1", time.Minute, 0, false)
	if err != nil || a.Status != reentrant.Acquired {
		t.Fatalf("acquire after SCRIPT FLUSH = %+v, %v", a, err)
	}
	if n, _ := rc.Do(bg(), rc.B().Hget().Key(name).Field("f:1").Build()).AsInt64(); n != 1 {
		t.Fatalf("hold count %d, want 1: the fallback ran the script twice?", n)
	}
	if ok, err := reentrant.ForceUnlock(bg(), rc, name, reentrant.Publish); err != nil || !ok {
		t.Fatalf("force unlock = %v, %v", ok, err)
	}
}

func TestFencedAcquire(t *testing.T) {
	rc := client(t)
	name := t.Name()
	var last uint64
	for i := 0; i < 3; i++ { // re-entries take tokens too
		a, err := acquire(rc, name, "f:1", time.Minute, i, true)
		if err != nil || a.Status != reentrant.Acquired || a.Token <= last {
			t.Fatalf("fenced acquire %d = %+v, %v; want a token above %d", i, a, err, last)
		}
		last = a.Token
	}
	a, err := acquire(rc, name, "g:1", time.Minute, 0, true)
	if err != nil || a.Status != reentrant.Busy || a.TTL <= 0 {
		t.Fatalf("fenced acquire by another field = %+v, %v; want refused with a TTL", a, err)
	}
	if v, err := reentrant.RaiseFence(bg(), rc, name, 2); err != nil || v != last {
		t.Fatalf("RaiseFence below the counter = %d, %v; want %d unchanged", v, err, last)
	}
	if v, err := reentrant.RaiseFence(bg(), rc, name, 1000); err != nil || v != 1000 {
		t.Fatalf("RaiseFence = %d, %v; want 1000", v, err)
	}
	reentrant.ForceUnlock(bg(), rc, name, reentrant.Publish)
	rc.Do(bg(), rc.B().Del().Key(reentrant.TokenName(name)).Build())
}

// 250 holds go out as 3 renew commands (100, 100, 50) in one DoMulti.
func TestRenewBatchesInChunks(t *testing.T) {
	rc := client(t)
	if err := reentrant.Load(bg(), rc); err != nil {
		t.Fatal(err)
	}
	var holds []reentrant.Hold
	for i := 0; i < 250; i++ {
		h := reentrant.Hold{Name: t.Name() + ":" + strconv.Itoa(i), Field: "f:1"}
		if i%2 == 0 { // half are held by the field, half not at all
			if _, err := acquire(rc, h.Name, h.Field, time.Second, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		holds = append(holds, h)
	}
	b := reentrant.BuildRenew(rc, time.Minute, holds)
	if len(b.Cmds) != 3 || len(b.Holds[0]) != 100 || len(b.Holds[2]) != 50 {
		t.Fatalf("%d commands, want 3 of 100, 100, 50", len(b.Cmds))
	}
	renewed := 0
	for i, res := range rc.DoMulti(bg(), b.Cmds...) {
		r, err := reentrant.ParseRenew(res, len(b.Holds[i]))
		if err != nil {
			t.Fatal(err)
		}
		for j, ok := range r {
			if ok != (j%2 == 0) {
				t.Fatalf("hold %d of command %d renewed=%v", j, i, ok)
			}
			if ok {
				renewed++
			}
		}
	}
	if renewed != 125 {
		t.Fatalf("renewed %d, want 125", renewed)
	}
	pttl, _ := rc.Do(bg(), rc.B().Pttl().Key(holds[0].Name).Build()).AsInt64()
	if pttl <= time.Second.Milliseconds() {
		t.Fatalf("PTTL %d after renewal to a minute", pttl)
	}
	rc.Do(bg(), rc.B().Flushall().Build())
}

// A hash that is not a lock (another program's) gets an error, not a panic.
func TestWrongTypeKey(t *testing.T) {
	rc := client(t)
	name := t.Name()
	rc.Do(bg(), rc.B().Set().Key(name).Value("x").Build())
	if _, err := acquire(rc, name, "f:1", time.Minute, 0, false); err == nil {
		t.Fatal("acquire on a string key succeeded")
	}
	rc.Do(bg(), rc.B().Del().Key(name).Build())
}

// acquire sends one counted acquire request with a fresh request id.
func acquire(rc rueidis.Client, name, field string, lease time.Duration, known int, fenced bool) (reentrant.AcquireResult, error) {
	req := reentrant.AcquireRequest{Name: name, Field: field, Lease: lease, Known: known, RequestID: reentrant.NewRequestID(), Fenced: fenced}
	return req.Run(bg(), rc)
}

// Read-write lock names, from Redisson's source: the channel
// (prefixName "redisson_rwlock"), the reader's timeout-key prefix
// (suffixName(name, field) + ":rwlock_timeout") and the writer's field.
func TestRWNames(t *testing.T) {
	cases := []struct{ got, want string }{
		{reentrant.RWChannelName("orders:42"), "redisson_rwlock:{orders:42}"},
		{reentrant.RWChannelName("user:{7}:cart"), "redisson_rwlock:user:{7}:cart"},
		{reentrant.ReadTimeoutPrefix("a", "u:1"), "{a}:u:1:rwlock_timeout"},
		{reentrant.ReadTimeoutPrefix("x{y}", "u:1"), "x{y}:u:1:rwlock_timeout"},
		{reentrant.WriterField("u:1"), "u:1:write"},
		{reentrant.ModeRead.Channel("a"), "redisson_rwlock:{a}"},
		{reentrant.ModeLock.Channel("a"), "redisson_lock__channel:{a}"},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// Read holds go out in commands of their own (two keys a hold: 50 a
// command), beside the plain ones, in one DoMulti; each renews the hash
// and every timeout key of its field.
func TestRenewBatchesReadHolds(t *testing.T) {
	rc := client(t)
	if err := reentrant.Load(bg(), rc); err != nil {
		t.Fatal(err)
	}
	var holds []reentrant.Hold
	for i := 0; i < 90; i++ {
		h := reentrant.Hold{Name: t.Name() + ":" + strconv.Itoa(i), Field: "f:1", Read: i%3 != 0}
		mode := reentrant.ModeWrite
		if h.Read {
			mode = reentrant.ModeRead
		} else {
			h.Field = reentrant.WriterField("f:1")
		}
		for k := 0; k < 2; k++ { // two holds: timeout keys 1 and 2
			a, err := reentrant.AcquireRequest{Name: h.Name, Field: h.Field, Lease: time.Second, Known: k,
				RequestID: reentrant.NewRequestID(), Mode: mode}.Run(bg(), rc)
			if err != nil || a.Status != reentrant.Acquired {
				t.Fatalf("acquire = %+v, %v", a, err)
			}
		}
		holds = append(holds, h)
	}
	b := reentrant.BuildRenew(rc, time.Minute, holds)
	sizes := []int{}
	for _, hs := range b.Holds {
		sizes = append(sizes, len(hs))
	}
	if !slices.Equal(sizes, []int{30, 50, 10}) { // 30 writes; 60 reads, 50 a command (100 keys)
		t.Fatalf("commands of %v holds, want 30, 50, 10", sizes)
	}
	for i, res := range rc.DoMulti(bg(), b.Cmds...) {
		r, err := reentrant.ParseRenew(res, len(b.Holds[i]))
		if err != nil {
			t.Fatal(err)
		}
		for j, ok := range r {
			if !ok {
				t.Fatalf("hold %d of command %d not renewed", j, i)
			}
		}
	}
	for _, h := range holds {
		ks := []string{h.Name}
		if h.Read {
			ks = append(ks, reentrant.ReadTimeoutPrefix(h.Name, h.Field)+":1", reentrant.ReadTimeoutPrefix(h.Name, h.Field)+":2")
		}
		for _, k := range ks {
			if p, _ := rc.Do(bg(), rc.B().Pttl().Key(k).Build()).AsInt64(); p <= time.Second.Milliseconds() {
				t.Fatalf("PTTL %s = %d after renewal to a minute", k, p)
			}
		}
	}
	rc.Do(bg(), rc.B().Flushall().Build())
}

// The counted acquire answers a free lock's first hold with the token
// alone (three commands, as Redisson's acquire); every other case keeps
// the full answer. A request settled before it arrives finds its record
// even on a free lock, and a client that knew holds the lock no longer
// has is told so: neither takes the short path.
func TestCountedAcquireShortAnswer(t *testing.T) {
	rc := client(t)
	name := t.Name()
	t.Cleanup(func() { rc.Do(bg(), rc.B().Del().Key(name, reentrant.TokenName(name)).Build()) })

	id := reentrant.NewRequestID()
	if _, err := (reentrant.Settle{Name: name, Field: "f:1", RequestID: id, RecordTTL: time.Minute}).Run(bg(), rc); err != nil {
		t.Fatal(err)
	}
	a, err := reentrant.AcquireRequest{Name: name, Field: "f:1", Lease: time.Minute, RequestID: id}.Run(bg(), rc)
	if err != nil || a.Status != reentrant.Cancelled {
		t.Fatalf("acquire settled before it ran, on a free lock = %+v, %v; want Cancelled", a, err)
	}
	if n, _ := rc.Do(bg(), rc.B().Exists().Key(name).Build()).AsInt64(); n != 0 {
		t.Fatal("a cancelled acquire took the free lock")
	}
	if a, err := acquire(rc, name, "f:1", time.Minute, 1, false); err != nil || a.Status != reentrant.Fewer || a.Count != 0 {
		t.Fatalf("acquire knowing a hold, on a free lock = %+v, %v; want Fewer, 0", a, err)
	}
	a, err = acquire(rc, name, "f:1", time.Minute, 0, true)
	if err != nil || a.Status != reentrant.Acquired || a.Count != 1 || a.Token == 0 {
		t.Fatalf("fenced acquire of a free lock = %+v, %v; want Acquired, count 1, a token", a, err)
	}
	ttl, _ := rc.Do(bg(), rc.B().Pttl().Key(name).Build()).AsInt64()
	if ttl <= 0 || ttl > time.Minute.Milliseconds() {
		t.Fatalf("pttl %d after a free lock's acquire, want the lease", ttl)
	}
	raw := reentrant.AcquireCountedScript.Run(bg(), rc, []string{name, reentrant.LatchName(name, reentrant.NewRequestID()), reentrant.TokenName(name)},
		[]string{"60000", "f:1", "1", "0"})
	if v, err := raw.AsIntSlice(); err != nil || len(v) != 3 || v[0] != 1 || v[1] != 2 {
		t.Fatalf("re-entry's answer = %v, %v; want the full {1, 2, 0}", v, err)
	}
	// A request settled before it arrives, on a held lock: Cancelled too.
	id = reentrant.NewRequestID()
	if _, err := (reentrant.Settle{Name: name, Field: "g:1", RequestID: id, RecordTTL: time.Minute}).Run(bg(), rc); err != nil {
		t.Fatal(err)
	}
	a, err = reentrant.AcquireRequest{Name: name, Field: "g:1", Lease: time.Minute, RequestID: id}.Run(bg(), rc)
	if err != nil || a.Status != reentrant.Cancelled {
		t.Fatalf("acquire settled before it ran, on a held lock = %+v, %v; want Cancelled", a, err)
	}
}

// A lease that is not positive would delete the key (PEXPIRE 0) or leave
// it without expiry: Run refuses it and sends nothing.
func TestAcquireRefusesALeaseThatIsNotPositive(t *testing.T) {
	rc := client(t)
	name := t.Name()
	for _, lease := range []time.Duration{0, -time.Millisecond, -time.Second} {
		if a, err := acquire(rc, name, "f:1", lease, 0, false); err == nil || !strings.Contains(err.Error(), "lease must be positive") {
			t.Fatalf("acquire with lease %v = %+v, %v; want an error saying the lease must be positive", lease, a, err)
		}
		if n, _ := rc.Do(bg(), rc.B().Exists().Key(name).Build()).AsInt64(); n != 0 {
			t.Fatalf("acquire with lease %v left the key", lease)
		}
	}
}
