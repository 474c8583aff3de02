package redissonconfig_test

import (
	"os"
	"testing"

	"github.com/rlock-go/rlock/integration"
)

// shared is one real redis-server, with a password, for the tests and
// examples that connect.
var shared *integration.Server

// sharedPassword is shared's password.
const sharedPassword = "redisson-config-test"

func TestMain(m *testing.M) {
	integration.Main(m, 1, integration.Options{Password: sharedPassword}, func(s []*integration.Server) {
		shared = s[0]
		// The examples' configs name the server through variables, as a
		// Redisson config names what differs between deployments.
		os.Setenv("REDIS_ADDR", shared.Addr())
		os.Setenv("REDIS_PASSWORD", sharedPassword)
	})
}
