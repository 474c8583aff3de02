package integration

import (
	"runtime"
	"syscall"
	"unsafe"
)

// cpuSet is a cpu_set_t of 1024 CPUs.
type cpuSet [16]uint64

// allowedCPUs returns the CPUs this process may run on (its affinity),
// or 0..NumCPU-1 when the system does not say.
func allowedCPUs() []int {
	var set cpuSet
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set))); e != 0 {
		return firstCPUs(runtime.NumCPU())
	}
	var cpus []int
	for cpu := range len(set) * 64 {
		if set[cpu/64]&(1<<(cpu%64)) != 0 {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) == 0 {
		return firstCPUs(runtime.NumCPU())
	}
	return cpus
}

// lockToCPU locks the calling goroutine to its thread and keeps the
// thread on cpu; when the system refuses, the thread runs where it is
// put.
func lockToCPU(cpu int) {
	runtime.LockOSThread()
	var set cpuSet
	if cpu >= len(set)*64 {
		return
	}
	set[cpu/64] = 1 << (cpu % 64)
	_, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set)))
}
