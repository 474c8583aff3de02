package main

import (
	"os/exec"
	"runtime"
	"syscall"
)

// setDeathSignal asks Linux to send the command SIGTERM if rlock dies
// first (SIGKILL, the OOM killer): rlock's lock stops being renewed then,
// so the command must not go on believing it holds it.
//
// The kernel sends it when the thread that started the command exits, not
// the process, so the calling goroutine stays locked to its thread: run
// calls this from the main goroutine, which lives until rlock exits.
func setDeathSignal(cmd *exec.Cmd) {
	runtime.LockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}
