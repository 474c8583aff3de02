//go:build !linux

package main

import "os/exec"

// setDeathSignal does nothing outside Linux, which alone has a parent
// death signal: if rlock is killed, the command runs on unprotected once
// the lease runs out.
func setDeathSignal(*exec.Cmd) {}
