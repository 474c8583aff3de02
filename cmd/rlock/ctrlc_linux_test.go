package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/rlock-go/rlock/integration"
)

// openPTY opens a pseudo-terminal pair with the standard library only:
// /dev/ptmx, unlocked (TIOCSPTLCK) and its number read (TIOCGPTN), as
// posix_openpt, unlockpt and ptsname do.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	ioctl := func(req uintptr, arg *int32) error {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), req, uintptr(unsafe.Pointer(arg))); e != 0 {
			return e
		}
		return nil
	}
	var unlock, n int32
	if err := ioctl(syscall.TIOCSPTLCK, &unlock); err != nil {
		m.Close()
		t.Fatalf("TIOCSPTLCK: %v", err)
	}
	if err := ioctl(syscall.TIOCGPTN, &n); err != nil {
		m.Close()
		t.Fatalf("TIOCGPTN: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	return m, s
}

// TestRunSignalOnce: whoever signals, the command gets one SIGINT, as
// under flock(1): a SIGINT sent to rlock's process group (timeout(1), CI
// runners, kill -INT -PGID), one sent to rlock's pid, and a Ctrl-C at the
// terminal. The command runs in a process group of its own, which gets
// the terminal's foreground while it runs, and rlock forwards what it
// receives once. The counter waits for the command to exit before the
// count is read. With a terminal, rlock runs in a new session whose
// controlling terminal is a pseudo-terminal, in its foreground, as under
// an interactive shell.
func TestRunSignalOnce(t *testing.T) {
	srv := newServer(t, integration.Options{})
	for _, tc := range []struct {
		name string
		tty  bool
		how  sendHow
	}{
		{"group, no terminal", false, toGroup},
		{"pid, no terminal", false, toPid},
		{"Ctrl-C at the terminal", true, ctrlCKey},
		{"group at a terminal", true, toGroup},
		{"pid at a terminal", true, toPid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := interrupt(t, srv.Addr(), tc.tty, tc.how)
			if !strings.Contains(out, "SIGINTs: 1\n") && !strings.Contains(out, "SIGINTs: 1\r\n") {
				t.Fatalf("the command did not count one SIGINT:\n%s", out)
			}
		})
	}
}

// sendHow is how interrupt sends SIGINT.
type sendHow int

const (
	toGroup  sendHow = iota // kill -INT -PGID, rlock's process group
	toPid                   // kill -INT PID, rlock's pid
	ctrlCKey                // ^C typed at the terminal
)

// interrupt runs rlock with the signal counter (on a pseudo-terminal when
// tty), sends SIGINT as how says once the counter started, waits for rlock
// to exit, and returns what rlock and the command printed.
func interrupt(t *testing.T, addr string, tty bool, how sendHow) string {
	t.Helper()
	argv, env := countSignalsCmd(t, "INT")
	args := append([]string{"run", "--verbose", "--addr", addr, "--name", lockName(t), "--"}, argv...)
	cmd := rlockCmd(t, []string{env}, args...)
	out := new(lockedBuilder)
	var wg sync.WaitGroup
	var master *os.File
	if tty {
		var slave *os.File
		master, slave = openPTY(t)
		defer master.Close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(out, master) // ends with EIO once the session is gone
		}()
	} else {
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the command to start", func() bool { return strings.Contains(out.String(), "started") })
	var err error
	switch how {
	case toGroup:
		err = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) // rlock leads its group
	case toPid:
		err = syscall.Kill(cmd.Process.Pid, syscall.SIGINT)
	case ctrlCKey:
		_, err = master.Write([]byte{0x03})
	}
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := exitCode(t, cmd, err); code != 0 {
		t.Fatalf("exit %d; output:\n%s", code, out)
	}
	if master != nil {
		master.Close()
	}
	wg.Wait()
	return out.String()
}

// controlTries is how often a control case (a signal expected twice) is
// tried: two signals that come close together can reach the command as
// one (the kernel and Go's runtime keep one pending signal of a kind),
// most often on a busy machine. The case that expects one signal is tried
// once.
const controlTries = 3

// TestRunSystemdStop: when systemd stops a service whose main process is
// rlock (KillMode=control-group, the default), SIGTERM goes to every
// process of the unit; the command gets it once. The test sets what
// systemd sets ($INVOCATION_ID, $SYSTEMD_EXEC_PID) and signals rlock's
// process group and the command's, which together hold what the control
// group would.
func TestRunSystemdStop(t *testing.T) {
	srv := newServer(t, integration.Options{})
	for _, tc := range []struct {
		name    string
		script  string
		want    string
		control bool
	}{
		{"main process", `export INVOCATION_ID=0123 SYSTEMD_EXEC_PID=$$; exec "$@"`, "SIGTERMs: 1", false},
		// The control: not the unit's main process, SIGTERM is forwarded
		// (rlock says so; the counter may see the two as one).
		{"not systemd", `unset INVOCATION_ID SYSTEMD_EXEC_PID; exec "$@"`, "forwarding SIGTERM", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 1
			if tc.control {
				tries = controlTries
			}
			var out string
			for i := 0; i < tries; i++ {
				if out = groupTERM(t, srv.Addr(), tc.script); strings.Contains(out, tc.want) {
					return
				}
			}
			t.Fatalf("output has no %q:\n%s", tc.want, out)
		})
	}
}

// groupTERM runs rlock with the signal counter through script (sh -c
// script sh RLOCK-ARGS...) in a process group of their own, sends SIGTERM
// to that group and to the command's once the counter started, as
// systemd signals every process of a control group, and returns the
// output.
func groupTERM(t *testing.T, addr, script string) string {
	t.Helper()
	argv, env := countSignalsCmd(t, "TERM")
	cmd := rlockCmd(t, []string{env})
	cmd.Path, cmd.Err = "/bin/sh", nil
	cmd.Args = append([]string{"sh", "-c", script, "sh", rlockBin, "run", "--verbose", "--addr", addr, "--name", lockName(t), "--"}, argv...)
	out := new(lockedBuilder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command to start", func() bool { return strings.Contains(out.String(), "started") })
	m := regexp.MustCompile(`\(pid ([0-9]+)\)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("rlock names no command pid:\n%s", out)
	}
	child, _ := strconv.Atoi(m[1])
	for _, pg := range []int{cmd.Process.Pid, child} {
		if err := syscall.Kill(-pg, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String()
}

// TestRunCtrlZ: a Ctrl-Z stops the command's group; rlock takes the
// terminal's foreground back and stops itself, so a shell waiting for
// rlock would get the terminal. SIGCONT to rlock (the shell's fg) gives
// the command the foreground again and continues it: a Ctrl-C then
// reaches it, once.
func TestRunCtrlZ(t *testing.T) {
	srv := newServer(t, integration.Options{})
	master, slave := openPTY(t)
	defer master.Close()
	argv, env := countSignalsCmd(t, "INT")
	cmd := rlockCmd(t, []string{env}, append([]string{"run", "--addr", srv.Addr(), "--name", lockName(t), "--"}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	out := new(lockedBuilder)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(out, master)
	}()
	rlock := cmd.Process.Pid
	waitFor(t, "the command to start", func() bool { return strings.Contains(out.String(), "started") })
	if fg := foregroundOf(t, master); fg == rlock {
		t.Fatalf("the terminal's foreground is rlock's group %d while the command runs", fg)
	}
	if _, err := master.Write([]byte{0x1a}); err != nil { // ^Z
		t.Fatal(err)
	}
	// Nothing signals a stop to the test (rlock is not its child's
	// child): /proc says.
	waitFor(t, "rlock to stop", func() bool { return processState(rlock) == 'T' })
	if fg := foregroundOf(t, master); fg != rlock {
		t.Fatalf("rlock stopped, but the terminal's foreground is %d, not rlock's group %d", fg, rlock)
	}
	if err := syscall.Kill(rlock, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command's group to get the foreground", func() bool { return foregroundOf(t, master) != rlock })
	if _, err := master.Write([]byte{0x03}); err != nil { // ^C
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := exitCode(t, cmd, err); code != 0 {
		t.Fatalf("exit %d; terminal:\n%s", code, out)
	}
	master.Close()
	wg.Wait()
	if !strings.Contains(out.String(), "SIGINTs: 1") {
		t.Fatalf("the command did not count one SIGINT:\n%s", out)
	}
}

// foregroundOf returns the foreground process group of the terminal whose
// master side is m.
func foregroundOf(t *testing.T, m *os.File) int {
	t.Helper()
	var pg int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pg))); e != 0 {
		t.Fatalf("TIOCGPGRP: %v", e)
	}
	return int(pg)
}

// processState returns the state letter of process pid in /proc (0 if
// it is gone).
func processState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
