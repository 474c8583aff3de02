package multilock

// WaitBackground waits for the per-master calls of l that outlived their
// rounds, so that tests can look at the masters once nothing of l is in
// flight.
func WaitBackground(l *Lock) { l.bg.Wait() }
