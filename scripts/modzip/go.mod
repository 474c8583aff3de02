module github.com/rlock-go/rlock/scripts/modzip

go 1.26.0

require golang.org/x/mod v0.43.0
