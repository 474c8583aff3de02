//go:build !linux

package main

import (
	"os"
	"os/exec"
)

// terminal is Linux's only: elsewhere the command stays in rlock's
// process group and every signal rlock receives is forwarded to it.
type terminal struct{}

func foregroundTerminal() *terminal        { return nil }
func ownGroup(*exec.Cmd, *terminal)        {}
func (*terminal) background(int)           {}
func (*terminal) restore()                 {}
func alreadyDelivered(os.Signal, int) bool { return false }
func forward(pid int, sig os.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}
