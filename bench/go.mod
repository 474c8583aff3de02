module github.com/rlock-go/rlock/bench

go 1.26.0

replace github.com/rlock-go/rlock => ../

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
	github.com/rlock-go/rlock v0.0.0-00010101000000-000000000000
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
