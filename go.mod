module github.com/rlock-go/rlock

go 1.26

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/redis/rueidis v1.0.79
)

require golang.org/x/sys v0.47.0 // indirect
