//go:build !linux

package main

import "os"

// alreadyDelivered is Linux's only: elsewhere every signal is forwarded.
func alreadyDelivered(os.Signal, int) bool { return false }
