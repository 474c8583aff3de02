// Package faultsuite holds rlock's fault suite: a test, not a library.
//
// TestFaultSuite runs three clients contending on one lock — a single
// master (lock.Mutex), a RedLock over five masters (multilock), Redisson's
// spin lock (lock.Client.SpinMutex) and its fair lock (FairMutex, which
// takes no fencing tokens: its rounds check exclusion and hold counts, and
// that no waiter is left in the fair queue once every call returned) — on real
// redis-server processes and, when Docker is there, containers (package
// integration). Each holder writes to an in-process resource that accepts a
// write only with a fencing token at least as high as any it has accepted.
// Two more cases take Redisson's other kinds on one master: the spin lock,
// and the read-write lock (rwlock), whose workers take the write lock
// without tokens (Redisson has none for it; its rounds are checked for
// exclusion and hold counts, not fencing) while two readers share the read
// lock; a writer's write or a reader's look made, believing it held the
// lock, after the other kind was granted is a double grant
// (readers_test.go). The multi case takes Redisson's getMultiLock on one
// master: two workers take a MultiLock (multilock.NewMultiLock) over three
// names of one Client, all or nothing, while the third takes a plain
// fenced lock.Mutex of one of those names at each hold; a MultiLock's
// acquisition is recorded as one hold per name, each with that name's
// token (FenceOf), and every check below runs per name (multi_test.go).
// Meanwhile a scheduler injects faults drawn from a seed: kill with a
// delayed restart, restart keeping the (persisted) data, pauses and
// partitions shorter and longer than the lease, a clock within the drift
// factor; and, outside the documented assumptions, a restart at once
// without data, a holder paused past its lease, a clock five times fast.
// Other kinds change, while they last, how the clients use the lock:
// goroutines sharing an owner (lock.WithOwner) that re-enter and unlock
// concurrently and hand their Held's context to nested goroutines;
// re-entries with a Lease shorter than the outer hold's; single lost
// requests or replies of the acquire, release and renew scripts (the
// proxy's Inject); Lock deadlines expiring while an acquire's reply is
// delayed; contexts carrying an owner given to Lock, on RedLock too;
// Clients whose CommandTimeout + RenewInterval is just under the lease;
// and Clients of the workers' own closed, with short ctx deadlines, while
// the masters are stopped and calls of theirs, with short deadlines too,
// are in flight (close-stopped, closestopped_test.go).
//
// Every round's history (acquire, writes, release or loss, each with call
// and return times) is checked with porcupine against a model of a lock
// with fencing, and counted: double grants (a holder wrote, believing it
// held the lock, after another had been granted it), stale writes
// (rejected by the fence, or not), losses signalled on the holder's context
// (in time, or only after another holder got the lock) and losses never
// signalled. On a single master the workers also read their owner's hold
// count from Redis (a direct connection, past the proxy) after each Lock
// and Unlock, mid-hold and at a loss signal; the model's state is the
// holder field and its count, so a count that does not match the holds
// fails the round, and a loss signalled while Redis still held the lock
// is counted as a false loss. Every Lock, TryLock, Unlock, ForceUnlock
// and Close made with a ctx deadline is timed against it
// (slack_test.go): each round's line and the report give the calls cut by
// their deadline and how long after it they returned (p99, worst); with
// RLOCK_FAULT_HARD_SLACK set, a call of package lock more than 50 ms late
// fails the round (RedLock's and MultiLock's calls are reported only).
// Inside the assumptions there must be no
// double grant and no unsignalled loss; outside them the suite shows the
// overlap and what the fence did about it. A round in which the suite's
// own process was not scheduled for 50 ms or more (the stall meter of
// package integration; a machine that freezes its processes) is outside
// them too: its holders may not run before their leases end, which is
// the pause holder-pause makes on purpose. Its line says so, and the case
// logs how many rounds it put outside. docs/safety.md has the figures of
// a long run.
//
// Running it:
//
//	go test ./faultsuite/                          # bounded: 6 rounds per case
//	RLOCK_FAULT_SEED=42 go test ./faultsuite/      # replay a schedule
//	RLOCK_FAULT_DURATION=2m go test -timeout 30m ./faultsuite/ -faultsuite.report=run.md
//
// Environment:
//
//   - RLOCK_FAULT_ROUNDS: rounds per case (backend × lock). Default 6: the
//     four cases' lead faults follow each other, so that a run over both
//     backends leads with every kind at least once. The multi case runs 3
//     by default, to keep CI's time; RLOCK_FAULT_ROUNDS or
//     RLOCK_FAULT_DURATION sets it as any other.
//   - RLOCK_FAULT_DURATION: time per case, such as 2m; alone, rounds run
//     until it is spent. The test's -timeout also stops the rounds.
//   - RLOCK_FAULT_SEED: round i of every case uses seed SEED+i. Random and
//     printed when unset. A failing round is replayed alone with
//     RLOCK_FAULT_SEED=<its seed> RLOCK_FAULT_ROUNDS=1 and -run naming its
//     case, as its failure message says. The schedule replays exactly; the
//     interleaving of the clients, which depends on timing, does not.
//   - RLOCK_FAULT_KINDS: comma-separated fault kinds to draw from (see
//     faults_test.go), to hunt one problem.
//   - RLOCK_FAULT_HARD_SLACK: when set, a call of package lock that
//     returns more than 50 ms after its ctx deadline fails its round
//     (issue 29's bound; off by default, since a loaded machine can miss
//     it by scheduling alone); otherwise such calls are reported.
//   - RLOCK_FAULT_REPORT, or the test flag -faultsuite.report: a file to
//     which each case appends its summary as markdown table rows.
//   - RLOCK_FAULT_TRACE: when set, every round's history and the clients'
//     events are logged, not only a failed round's.
//   - RLOCK_REQUIRE: as in package integration, a backend it names must run.
package faultsuite
