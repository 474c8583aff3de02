package main

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// The command runs in a process group of its own, as a shell runs a job:
// a signal sent to rlock's group (timeout(1), a CI runner, kill -INT
// -PGID) reaches rlock alone, and rlock forwards it once. With a
// terminal, the command's group is given the terminal's foreground while
// it runs, so a Ctrl-C reaches the command alone, once; rlock takes the
// foreground back when the command has exited.

// terminal is rlock's controlling terminal, when rlock's process group is
// its foreground group.
type terminal struct {
	f    *os.File
	done chan struct{}  // closed by restore: jobs returns
	wg   sync.WaitGroup // jobs
}

// foregroundTerminal returns rlock's controlling terminal if rlock's
// process group is in its foreground, else nil (no terminal, or rlock
// started in the background: the foreground is not rlock's to give).
func foregroundTerminal() *terminal {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil // no controlling terminal
	}
	if pg, err := tcgetpgrp(f); err != nil || pg != syscall.Getpgrp() {
		f.Close()
		return nil
	}
	return &terminal{f: f}
}

// ownGroup makes cmd start in a process group of its own, in the
// foreground of t when t is not nil. The child places its group in the
// foreground between fork and exec, with signals blocked, so the command
// never runs in the background of the terminal.
func ownGroup(cmd *exec.Cmd, t *terminal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if t != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = int(t.f.Fd())
	}
}

// background is called once the command (pid) started: rlock, now in the
// terminal's background, ignores SIGTTOU, so that neither its messages
// (with the terminal's tostop set) nor taking the foreground back stop
// it (the command started with its own dispositions, before this), and
// starts jobs.
func (t *terminal) background(pid int) {
	if t == nil {
		return
	}
	signal.Ignore(syscall.SIGTTOU)
	t.done = make(chan struct{})
	t.wg.Add(1)
	go t.jobs(pid)
}

// jobs does for rlock's shell what a shell does for its jobs. When a
// Ctrl-Z stopped the command's group, rlock takes the foreground back and
// stops itself, so that the shell, which waits for rlock, gets the
// terminal; when the shell continues rlock (fg), the command's group gets
// the foreground and SIGCONT.
func (t *terminal) jobs(pid int) {
	defer t.wg.Done()
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGCHLD, syscall.SIGCONT)
	defer signal.Stop(c)
	c <- syscall.SIGCHLD // a stop before Notify: look once now
	stopped := false
	for {
		select {
		case s := <-c:
			switch {
			case s == syscall.SIGCHLD && !stopped && isStopped(pid):
				stopped = true
				t.setForeground(syscall.Getpgrp())
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			case s == syscall.SIGCONT && stopped:
				stopped = false
				t.setForeground(pid)
				_ = syscall.Kill(-pid, syscall.SIGCONT)
			}
		case <-t.done:
			return
		}
	}
}

// restore gives the foreground back to rlock's process group once the
// command has exited, and closes the terminal.
func (t *terminal) restore() {
	if t == nil {
		return
	}
	if t.done != nil {
		close(t.done)
		t.wg.Wait()
	}
	t.setForeground(syscall.Getpgrp())
	signal.Reset(syscall.SIGTTOU)
	t.f.Close()
}

// setForeground makes process group pg the terminal's foreground group.
func (t *terminal) setForeground(pg int) {
	p := int32(pg)
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, t.f.Fd(), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p)))
}

// isStopped reports whether process pid is stopped (state T in
// /proc/PID/stat, after the command name in parentheses).
func isStopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'T'
}

// tcgetpgrp returns the foreground process group of the terminal f.
func tcgetpgrp(f *os.File) (int, error) {
	var pg int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pg))); e != 0 {
		return 0, e
	}
	return int(pg), nil
}

// forward sends sig to the command's process group: to every process
// the command started there too, as a terminal would.
func forward(pid int, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return nil
	}
	return syscall.Kill(-pid, s)
}

// alreadyDelivered reports whether sig, received by rlock, was sent to
// the command as well by whoever sent it to rlock, so that forwarding it
// would make the command get it twice. Now that the command has a process
// group of its own, one sender does that: systemd stopping a service.
// With KillMode=control-group, its default, SIGTERM goes to every process
// of the unit. That is assumed when rlock is the unit's main process
// ($INVOCATION_ID is set and $SYSTEMD_EXEC_PID is rlock's pid) and the
// command is in rlock's control group.
func alreadyDelivered(sig os.Signal, child int) bool {
	return sig == syscall.SIGTERM && systemdMain() && sameCgroup(child)
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
