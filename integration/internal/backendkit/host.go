package backendkit

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// A test binary that is killed cannot clean up: Pdeathsig ends its
// redis-server processes, but its temporary directories stay, and without
// Ryuk so do its containers. Each directory holds an "owner" file and each
// container an owner label: "<boot id>/<pid>/<start time>" of the process
// that created it. The first server a process starts removes the
// directories and containers whose owner no longer runs on this boot of this
// machine. Anything else (other machines sharing a Docker daemon, directories
// without an owner file) is left alone.

// OwnerID identifies this process across PID reuse, for labels of what it
// creates.
var OwnerID = sync.OnceValue(func() string {
	return processID(os.Getpid())
})

// processID is "<boot id>/<pid>/<start time>" of a live process, or "" when
// there is none or /proc cannot tell.
func processID(pid int) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// Field 22, starttime, counted after the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 || fields[0] == "Z" || fields[0] == "X" {
		return "" // a zombie has exited; its parent has not reaped it
	}
	return strings.TrimSpace(string(boot)) + "/" + strconv.Itoa(pid) + "/" + fields[19]
}

// tempPrefix starts the name of every server directory, in os.TempDir()
// or RAMDir().
const tempPrefix = "rlock-redis-"

// MakeRoot creates a server directory owned by this process.
func MakeRoot() (string, error) { return makeRootIn("") }

// MakeRootInRAM creates a server directory owned by this process in
// RAMDir, or where MakeRoot does when there is none. Nothing written
// there waits for a disk, fsync included.
func MakeRootInRAM() (string, error) { return makeRootIn(RAMDir()) }

// RAMDir returns /dev/shm, a tmpfs on Linux, when this process can create
// a directory in it; else "".
var RAMDir = sync.OnceValue(func() string {
	const dir = "/dev/shm"
	probe, err := os.MkdirTemp(dir, tempPrefix+"probe-")
	if err != nil {
		return ""
	}
	_ = os.Remove(probe)
	return dir
})

// makeRootIn creates a server directory owned by this process in parent
// (os.TempDir() when "").
func makeRootIn(parent string) (string, error) {
	root, err := os.MkdirTemp(parent, tempPrefix)
	if err != nil {
		return "", fmt.Errorf("rlock: integration: %w", err)
	}
	if err := os.WriteFile(filepath.Join(root, "owner"), []byte(OwnerID()), 0o644); err != nil {
		return "", errors.Join(fmt.Errorf("rlock: integration: %w", err), os.RemoveAll(root))
	}
	return root, nil
}

// ReapDirs removes, once per process, the server directories of processes
// that no longer run.
var ReapDirs = sync.OnceFunc(func() {
	self := OwnerID()
	if self == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*"))
	if ram := RAMDir(); ram != "" {
		more, _ := filepath.Glob(filepath.Join(ram, tempPrefix+"*"))
		dirs = append(dirs, more...)
	}
	for _, dir := range dirs {
		owner, err := os.ReadFile(filepath.Join(dir, "owner"))
		if err == nil && OwnerGone(self, string(owner)) {
			_ = os.RemoveAll(dir)
		}
	}
})

// OwnerGone reports whether owner, as written by a process of this machine,
// names a process that no longer runs. self is this process's owner ID.
func OwnerGone(self, owner string) bool {
	boot, _, _ := strings.Cut(self, "/")
	parts := strings.Split(owner, "/")
	if len(parts) != 3 || parts[0] != boot {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	return err == nil && processID(pid) != owner
}

// RedisServerBin is the executable every backend runs, or copies into its
// image.
const RedisServerBin = "redis-server"

// PortAttempts bounds how often a first start retries on a fresh port when
// another process took the chosen one in the meantime.
const PortAttempts = 5

// FreePort asks the kernel for a free loopback port. Another process may
// take it before redis-server binds it; the backends then retry.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("rlock: integration: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
