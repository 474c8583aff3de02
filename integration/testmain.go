package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/internal/leakcheck"
)

// Main runs a package's tests around n servers shared by all of them:
// call it from TestMain. It starts the servers with opts (exiting with an
// error when it cannot: the tests need them), hands them to use, runs the
// tests with the stall meter running ([Stalled]), closes the servers and
// then fails the run if goroutines leaked (the goroutines running before
// the tests and those of IgnoreRueidis excepted; when a test failed, the
// leak is printed, not judged: leakcheck.Report). It does not return.
func Main(m *testing.M, n int, opts Options, use func([]*Server)) {
	before := leakcheck.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(context.Background(), 2*DefaultTimeout)
	servers, err := StartMasters(ctx, n, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlock: these tests need redis-server (Debian: apt-get install redis-server):", err)
		os.Exit(1)
	}
	use(servers)
	WatchStalls()
	code := m.Run()
	StopStalls()
	for _, s := range servers {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "rlock: integration: close redis-server:", err)
			code = 1
		}
	}
	if err := leakcheck.Find(before, leakcheck.IgnoreAnyFunction(IgnoreRueidis...)); err != nil {
		leakcheck.Report(err, &code)
	}
	os.Exit(code)
}

// IgnoreRueidis names the functions of goroutines that rueidis starts on
// its own and that end by themselves, for a leak check to ignore (with
// goleak: goleak.IgnoreAnyFunction of each): a cluster client that
// replaced connections during a topology refresh (several seed addresses
// dialled at once do that) closes the old ones after sleeping 5s, even
// after the client's Close. Everything else of an unclosed client is still
// found.
var IgnoreRueidis = []string{
	"github.com/redis/rueidis.(*clusterClient)._refresh.func2",
}

// NewClient returns a plain rueidis client on addr (usually a Server's
// DirectAddr, for a test's own looks at Redis), closed when the test ends.
func NewClient(tb testing.TB, addr string, password ...string) rueidis.Client {
	tb.Helper()
	opt := rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true}
	if len(password) > 0 {
		opt.Password = password[0]
	}
	opt.Dialer.Timeout = 5 * time.Second
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		tb.Fatalf("rlock: integration: client for %s: %v", addr, err)
	}
	tb.Cleanup(rc.Close)
	return rc
}
