package main

import (
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// alreadyDelivered reports whether sig, received by rlock, was sent to
// the command as well by whoever sent it to rlock, so that forwarding it
// would make the command get it twice. Two senders do that:
//
//   - the terminal: Ctrl-C (SIGINT) and Ctrl-\ (SIGQUIT) go to every
//     process of the terminal's foreground process group. That is the
//     case when rlock's process group is the foreground group of its
//     controlling terminal and the command is still in that group.
//   - systemd stopping a service: with KillMode=control-group, its
//     default, SIGTERM goes to every process of the unit. That is assumed
//     when rlock is the unit's main process ($INVOCATION_ID is set and
//     $SYSTEMD_EXEC_PID is rlock's pid) and the command is in rlock's
//     control group.
//
// Anything else (kill(1) at rlock, a supervisor signalling its child) is
// forwarded. A signal sent with kill(1) to rlock alone while it is in the
// foreground of a terminal is the one case told wrong: it is not
// forwarded (send it to the process group, kill -INT -PGID, instead).
func alreadyDelivered(sig os.Signal, child int) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT:
		return inForeground() && sameGroup(child)
	case syscall.SIGTERM:
		return systemdMain() && sameCgroup(child)
	}
	return false
}

// inForeground reports whether rlock's process group is the foreground
// group of its controlling terminal.
func inForeground() bool {
	f, err := os.OpenFile("/dev/tty", os.O_RDONLY|syscall.O_NOCTTY, 0)
	if err != nil {
		return false // no controlling terminal
	}
	defer f.Close()
	var pgrp int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); e != 0 {
		return false
	}
	return int(pgrp) == syscall.Getpgrp()
}

// sameGroup reports whether process pid is in rlock's process group.
func sameGroup(pid int) bool {
	g, err := syscall.Getpgid(pid)
	return err == nil && g == syscall.Getpgrp()
}

// systemdMain reports whether rlock is the main process of a systemd
// unit.
func systemdMain() bool {
	return os.Getenv("INVOCATION_ID") != "" && os.Getenv("SYSTEMD_EXEC_PID") == strconv.Itoa(os.Getpid())
}

// sameCgroup reports whether process pid is in rlock's control group.
func sameCgroup(pid int) bool {
	mine, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	its, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && string(mine) == string(its)
}
