package multilock

// WaitBackground waits for the per-master calls of l that outlived their
// rounds, so that tests can look at the masters once nothing of l is in
// flight.
func WaitBackground(l *Lock) { l.bg.Wait() }

// Queues returns how many local queues (entries of the registry:
// locks with waiters or live acquisitions in this process) exist.
func Queues() int {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return len(registry.m)
}
