//go:build !linux

package integration

import "runtime"

// allowedCPUs returns 0..NumCPU-1: the meters' threads are not pinned
// here.
func allowedCPUs() []int { return firstCPUs(runtime.NumCPU()) }

// lockToCPU locks the calling goroutine to its thread; the thread runs
// where the system puts it.
func lockToCPU(int) { runtime.LockOSThread() }
