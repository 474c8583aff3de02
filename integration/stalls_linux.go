package integration

import (
	"syscall"
	"unsafe"
)

// pinThread keeps the calling thread (locked to its goroutine) on cpu;
// when the system refuses, the thread runs where it is put.
func pinThread(cpu int) {
	var set [16]uint64 // a cpu_set_t of 1024 CPUs
	if cpu >= len(set)*64 {
		return
	}
	set[cpu/64] = 1 << (cpu % 64)
	_, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set)))
}
