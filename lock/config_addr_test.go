package lock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/rlock-go/rlock/integration"
	"github.com/rlock-go/rlock/lock"
)

// TestConfigAddrURL: Config.Addrs takes Redisson's URLs,
// redis://[[user]:password@]host:port[/db] and rediss:// for TLS, as the
// CLI and redissonconfig do. A URL's credentials win over Username and
// Password (as in Redisson); its database must agree with DB when both
// are given; a bad address says what is wanted.
func TestConfigAddrURL(t *testing.T) {
	const pw = "url-pw"
	srv := integrationRedis(t, integration.Options{Password: pw})
	ctx := context.Background()
	connect := func(t *testing.T, cfg lock.Config) (*lock.Client, error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := lock.New(cctx, cfg)
		if err == nil {
			t.Cleanup(func() { _ = c.Close(context.Background()) })
		}
		return c, err
	}

	for _, tc := range []struct {
		name string
		cfg  lock.Config
		db   int
	}{
		{"password in the URL", lock.Config{Addrs: []string{"redis://:" + pw + "@" + srv.Addr()}}, 0},
		{"password alone in the URL", lock.Config{Addrs: []string{"redis://" + pw + "@" + srv.Addr()}}, 0},
		{"the URL's password wins", lock.Config{Addrs: []string{"redis://:" + pw + "@" + srv.Addr()}, Password: "wrong"}, 0},
		{"Config's password, URL without one", lock.Config{Addrs: []string{"redis://" + srv.Addr() + "/2"}, Password: pw}, 2},
		{"database agreeing", lock.Config{Addrs: []string{"redis://:" + pw + "@" + srv.Addr() + "/3"}, DB: 3}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := connect(t, tc.cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			n := name(t)
			h, err := c.Mutex(n).TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock: %v", err)
			}
			defer h.Unlock(ctx)
			direct, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, Password: pw, SelectDB: tc.db, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			defer direct.Close()
			if got, err := direct.Do(ctx, direct.B().Exists().Key(n).Build()).AsInt64(); err != nil || got != 1 {
				t.Fatalf("the lock's key in database %d: EXISTS %d, %v", tc.db, got, err)
			}
		})
	}

	for _, tc := range []struct {
		name string
		cfg  lock.Config
		want string
	}{
		{"unknown scheme", lock.Config{Addrs: []string{"http://" + srv.Addr()}}, "redis://"},
		{"no port", lock.Config{Addrs: []string{"redis://127.0.0.1"}}, "port"},
		{"databases disagree", lock.Config{Addrs: []string{"redis://" + srv.Addr() + "/2"}, DB: 3}, "database"},
		{"plain host without port", lock.Config{Addrs: []string{"127.0.0.1"}}, "host:port or a redis:// URL"},
		{"mixed TLS", lock.Config{Cluster: true, Addrs: []string{"redis://127.0.0.1:1", "rediss://127.0.0.1:2"}}, "rediss://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := connect(t, tc.cfg)
			if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrInvalid with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
