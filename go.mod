module github.com/rlock-go/rlock

go 1.26.0

require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/redis/rueidis v1.0.79
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
