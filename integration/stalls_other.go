//go:build !linux

package integration

// pinThread does nothing here: the meter's threads run where the system
// puts them.
func pinThread(int) {}
