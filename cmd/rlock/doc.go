// Command rlock holds Redisson-compatible distributed locks from the shell,
// shows what Redis holds, and demonstrates the library.
//
// Usage:
//
//	rlock run --name NAME [--addr HOST:PORT[,HOST:PORT...]] [--all]
//	          [--wait D|SECONDS|forever] [--lease D] [--watchdog-timeout D]
//	          [--grace D] [--conflict-exit-code N] [--verbose|--quiet]
//	          [--no-fence] [--forward-all-signals] [--username U]
//	          [--password P] [--tls] [--trace stdout] -- COMMAND [ARGS...]
//	rlock inspect [--addr HOST:PORT] [--json] NAME
//	rlock demo [--workers N] [--rounds N] [--seed S] [--trace stdout]
//	rlock completion bash|zsh
//	rlock help [COMMAND]
//	rlock version
//
// # run
//
// run acquires the lock NAME (one attempt, or waiting up to --wait), runs
// COMMAND without a shell, stdin, stdout and stderr passed through, and
// releases the lock when it exits, with a fresh context bounded to a few
// seconds. Without --lease the watchdog renews the lock for as long as the
// command runs; --watchdog-timeout sets its lease (renewed every third of
// it). The command's environment is rlock's without RLOCK_PASSWORD, plus
// RLOCK_NAME, RLOCK_FENCE, the lock's fencing token (Redisson's
// RFencedLock counter), which strictly increases with every acquisition of
// NAME (not with --no-fence), and TRACEPARENT of rlock's hold span. The
// command runs in a process group of its own, in the terminal's
// foreground while it runs; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and
// SIGUSR2 that reach rlock are forwarded once to that group, except
// systemd's SIGTERM to a whole unit, which reached it already. If the lock is lost while the
// command runs, rlock prints why on stderr, sends the command SIGTERM,
// then SIGKILL after --grace, and exits 76.
//
// --wait takes a duration, flock's bare seconds or "forever". A busy lock
// is reported with its holder — rlock's own Clients have ids
// "<host>-<pid>-<random>", so the host and pid are shown — and whether
// its lease is renewed; --verbose says so while waiting, --quiet says
// nothing, and --conflict-exit-code 0 skips silently.
//
// --addr defaults to $RLOCK_ADDR, else 127.0.0.1:6379; --password to
// $RLOCK_PASSWORD.
//
// Several comma-separated addresses are independent masters, one
// lock.Client each with the same credentials and TLS settings (package
// multilock, behind the locker interface in locker.go): a RedLock, held
// once a majority (N/2+1) granted it, or with --all a MultiLock, held once
// every master did. Masters not reached within 3s are named on stderr and
// left out, as long as the quorum of all N is still reachable; the quorum
// stays a majority of all N (redlock.go says how). Otherwise run exits 69.
// RLOCK_FENCE is then the RedLock's token, written back to a majority. The
// lock is lost, and the command stopped, once fewer than the quorum hold
// it; with --lease, the lock's validity (the lease less the acquisition
// time and the clock drift allowance) bounds the command.
//
// --trace stdout prints the spans of the run (package tracing, one JSON
// object per span) on stdout; without it the standard
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT sends
// them over OTLP/HTTP. They are flushed before rlock exits, for at most
// 5s (trace.go).
//
// # inspect
//
// inspect reads the lock NAME: its holders (field, hold count, client id
// and owner id, host and pid for rlock's ids), TTL, whether it has
// Redisson's layout, its unlock channel and the connections subscribed to
// it (PUBSUB NUMSUB and SHARDNUMSUB), and the fenced lock's token, with
// warnings for a lock without TTL, several holders or a layout it cannot
// read. --json prints one JSON object. It exits 65 for a key that is not
// a lock, 69 when Redis is unreachable, 77 when it refuses the
// credentials.
//
// # demo
//
// demo starts embedded Redis servers (miniredis) in the process and runs
// workers contending for one lock, printing a timeline and a summary
// (acquisitions, re-entries, overlaps: 0, fencing tokens strictly
// increasing): first on one master, then on a RedLock over five masters,
// one of which the holder kills midway while the run goes on.
//
// # Exit codes
//
//	0      success; for run, the command exited 0
//	N      run: the command's exit status
//	128+S  run: the command died of signal S, or rlock was interrupted
//	       by signal S before the command started
//	1      inspect, demo: an error
//	64     bad usage: unknown flag or command, missing or empty name,
//	       bad duration, no command, an address given twice
//	65     inspect: the key is not a lock
//	69     Redis could not be reached (connecting gives up after 3s);
//	       several masters: fewer than the quorum could
//	70     internal error
//	75     run: the lock was not acquired within --wait: busy, or the
//	       quorum not had (--conflict-exit-code changes it)
//	76     run: the lock was lost while the command ran (several
//	       masters: fewer than the quorum still held it)
//	77     Redis refused the credentials (several masters: the quorum
//	       was not reached and one of them refused them)
//	126    run: the command could not be started
//	127    run: the command was not found
//
// All are defined in exit.go. Errors go to stderr, prefixed "rlock: ".
package main
