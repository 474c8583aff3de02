package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// parked blocks until release is closed.
func parked(started chan<- struct{}, release <-chan struct{}) {
	close(started)
	<-release
}

func TestFindReportsALeak(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	go parked(started, release)
	<-started
	err := Find()
	close(release)
	if err == nil || !strings.Contains(err.Error(), "leakcheck.parked") {
		t.Fatalf("Find with a parked goroutine: %v, want it named", err)
	}
	if err := Find(); err != nil {
		t.Fatalf("Find after the goroutine ended: %v", err)
	}
}

func TestFindWaitsForEndingGoroutines(t *testing.T) {
	go time.Sleep(50 * time.Millisecond)
	if err := Find(); err != nil {
		t.Fatalf("Find: %v", err)
	}
}

func TestIgnore(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	go parked(started, release)
	<-started
	if err := Find(IgnoreAnyFunction("github.com/rlock-go/rlock/internal/leakcheck.parked")); err != nil {
		t.Errorf("Find ignoring parked: %v", err)
	}
	if err := Find(IgnoreCurrent()); err != nil {
		t.Errorf("Find ignoring current goroutines: %v", err)
	}
}

func TestParse(t *testing.T) {
	g, ok := parse(`goroutine 7 [chan receive]:
github.com/redis/rueidis.(*clusterClient)._refresh.func2(0xc000010000, {0x0, 0x0})
	/x/cluster.go:10 +0x1
runtime.goexit({})
	/r/asm.s:1 +0x1
created by github.com/redis/rueidis.(*clusterClient)._refresh in goroutine 6
	/x/cluster.go:9 +0x1`)
	if !ok || g.id != "7" || len(g.funcs) != 2 || g.funcs[0] != "github.com/redis/rueidis.(*clusterClient)._refresh.func2" {
		t.Fatalf("parse = %+v, %v", g, ok)
	}
	if p := pkgOf(g.funcs[0]); p != "github.com/redis/rueidis" {
		t.Errorf("pkgOf = %q", p)
	}
	if standard(g) || !standard(goroutine{funcs: []string{"runtime.gopark", "os/signal.loop"}}) || !standard(goroutine{funcs: []string{"testing.(*T).Run", "main.main"}}) {
		t.Error("standard misjudged")
	}
}
