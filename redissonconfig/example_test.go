package redissonconfig_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/redissonconfig"
)

// A Java service's config, read by a Go service: both lock on the same
// master, with the same lease. Redisson's variables name what differs
// between deployments (here set by the test to a server of its own).
func ExampleLoad() {
	const yml = `
singleServerConfig:
  address: "redis://${REDIS_ADDR:-127.0.0.1:6379}"
  password: "${REDIS_PASSWORD}"
  database: 0
  timeout: 3000
  retryAttempts: 4
  clientName: null
lockWatchdogTimeout: 15000
codec: !<org.redisson.codec.Kryo5Codec> {}
`
	cfg, warnings, err := redissonconfig.Load([]byte(yml))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("watchdog timeout:", cfg.WatchdogTimeout, "command timeout:", cfg.CommandTimeout)
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}

	ctx := context.Background()
	c, err := lock.New(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close(ctx)
	h, err := c.Mutex("example:redissonconfig").Lock(ctx) // redisson.getLock("example:redissonconfig").lock()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held")
	if err := h.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// watchdog timeout: 15s command timeout: 3s
	// warning: line 7: singleServerConfig.retryAttempts: rlock retries a command within its CommandTimeout and the lease, on its own schedule
	// warning: line 10: codec: lock names and values are plain strings on both sides, whatever the codec
	// held
}

// A config with a nameMapper is loaded only with the same mapping in Go,
// named by the Java class the config gives.
func ExampleWithNameMapper() {
	const yml = `
sentinelServersConfig:
  masterName: "orders"
  sentinelAddresses:
  - "redis://sentinel-1:26379"
  - "redis://sentinel-2:26379"
nameMapper: !<com.example.TenantNameMapper> {tenant: "acme"}
`
	// Without it, Java and Go would lock different keys.
	_, _, err := redissonconfig.Load([]byte(yml))
	fmt.Println(strings.Contains(err.Error(), "rlock needs the same mapping in Go"))

	// com.example.TenantNameMapper prefixes every name with its tenant.
	tenant := func(name string) string { return "acme:" + name }
	cfg, _, err := redissonconfig.Load([]byte(yml), redissonconfig.WithNameMapper("com.example.TenantNameMapper", tenant))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.MasterSet, cfg.Addrs, cfg.NameMapper("orders:42"))
	// Output:
	// true
	// orders [sentinel-1:26379 sentinel-2:26379] acme:orders:42
}

// Settings rlock judges unsafe are refused with the line and the reason.
func ExampleLoad_refused() {
	const yml = `
clusterServersConfig:
  nodeAddresses: ["redis://127.0.0.1:7000"]
  timeout: 3000
lockWatchdogTimeout: 3000
`
	_, _, err := redissonconfig.Load([]byte(yml))
	fmt.Println(err)
	// Output:
	// rlock: redisson config: line 4: clusterServersConfig.timeout: 3s: with the watchdog renewing every 1s (lockWatchdogTimeout/3), a renewal could be answered after the lease of 3s it extends ran out; rlock needs timeout + lockWatchdogTimeout/3 < lockWatchdogTimeout: lower timeout below 2s or raise lockWatchdogTimeout
}
