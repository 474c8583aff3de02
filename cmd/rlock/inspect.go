package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"
	"github.com/rlock-go/rlock/lock"
	"github.com/rlock-go/rlock/reentrant"
)

const inspectUsage = `rlock inspect [--addr HOST:PORT] [--cluster] [--redisson-config FILE] [--json] NAME

Shows the lock NAME as Redis holds it: its holders (hash field, hold count,
the field split into client id and owner id, and for an rlock CLI's
client id "<host>-<pid>-<random>" its host and pid), its remaining TTL,
whether it has Redisson's layout (a hash of "<client id>:<integer>"
fields with integer hold counts; for a read-write lock, a "mode" field,
readers and the writer "<client id>:<integer>:write"), its unlock
channel (redisson_rwlock:{NAME} for a read-write lock) and how many
connections are subscribed to it (clients waiting for it), and the fenced
lock's token when redisson_lock_token:{NAME} exists, and a fair lock's
queue (Redisson's getFairLock: redisson_lock_queue:{NAME}) with each
waiter's remaining timeout. It only reads.

A hash whose fields are not a lock's ("HSET user:1 name bob age 3") is
not a lock: inspect says so and exits 65, and rlock run does too. Given
a key of a lock other than its hash (the fair lock's queue and timeouts,
a read lock hold's rwlock_timeout key, the token counter, an unlock's
latch), inspect names the lock it belongs to.

Warnings (lines "warning:", or "warnings" in JSON) flag a lock whose key
has no TTL (it never expires: blocking waiters wait forever), several
holders of one lock, and a key that is not a lock.

It takes run's connection flags: --cluster, --sentinel-master with
--sentinel, --db, TLS, and --redisson-config (its warnings with --verbose).

Exit codes:
  0     the lock was read: held or not (warnings do not change this)
  1     another error from Redis
  64    bad usage; also MOVED: a cluster node given without --cluster
  65    the key exists but is not a lock: a string, a list, ..., or a
        hash whose fields are not a lock's (an application's record)
  69    Redis could not be reached
  77    Redis refused the credentials`

// inspectOptions are inspect's flags.
type inspectOptions struct {
	conn    connFlags
	json    bool
	verbose bool
}

func newInspectFlags(o *inspectOptions) *flag.FlagSet {
	fs := newFlagSet("inspect")
	o.conn.register(fs, "Redis master `host:port` or redis:// URL (with --cluster: a seed node of the cluster); $"+envAddr+" sets the default")
	fs.BoolVar(&o.json, "json", false, "print one JSON object instead of text")
	fs.BoolVar(&o.verbose, "verbose", false, "print the warnings of --redisson-config on stderr")
	return fs
}

// lockInfo is what inspect reports; its JSON form is --json's output.
type lockInfo struct {
	Name   string `json:"name"`
	Addr   string `json:"addr"`
	Locked bool   `json:"locked"`
	// Type is the key's Redis type: "hash" for a lock, "none" if absent.
	Type string `json:"type"`
	// Redisson reports Redisson's RLock layout: a hash whose fields are
	// "<36-char uuid>:<integer>" with integer values; for a read-write
	// lock (Mode set), the field "mode" besides them, writers' fields
	// ending in ":write".
	Redisson bool `json:"redisson_layout"`
	// Mode is a read-write lock's (Redisson's RReadWriteLock) mode:
	// "read" or "write"; empty for any other lock.
	Mode string `json:"rwlock_mode,omitempty"`
	// TTLMillis is the remaining lease in ms; -1 when the key has no
	// expiry, -2 when it does not exist (Redis's PTTL).
	TTLMillis int64    `json:"ttl_ms"`
	Holders   []holder `json:"holders"`
	Channel   string   `json:"channel"`
	// Subscribers is PUBSUB NUMSUB of the channel: connections waiting
	// for the lock (rlock and Redisson share one per client).
	Subscribers int64 `json:"subscribers"`
	// ShardSubscribers is PUBSUB SHARDNUMSUB; null when the server has no
	// sharded pub/sub (Redis < 7).
	ShardSubscribers *int64 `json:"shard_subscribers"`
	TokenKey         string `json:"token_key"`
	// FenceToken is the fenced lock's last token; null when the token key
	// does not exist.
	FenceToken *int64 `json:"fence_token"`
	// QueueKey and FairQueue are a fair lock's (Redisson's getFairLock)
	// queue key and its waiters in order; both omitted when nobody waits
	// in such a queue.
	QueueKey  string   `json:"queue_key,omitempty"`
	FairQueue []waiter `json:"fair_queue,omitempty"`
	// NotLock, when set, says why the key is not a lock: another type, or
	// a hash whose fields are not a lock's (an application's record).
	NotLock string `json:"not_lock,omitempty"`
	// PartOf and Role name the lock that a key other than its hash
	// belongs to (the fair lock's queue, a read lock hold's timeout, the
	// token counter, ...) and what part of it the key is; PartOf is empty
	// when the key does not say the lock's name.
	PartOf string `json:"part_of,omitempty"`
	Role   string `json:"role,omitempty"`
	// ServerRole is "replica" when the server asked is one (ROLE): a run
	// on it fails with READONLY. Empty otherwise.
	ServerRole string `json:"server_role,omitempty"`
	// Warnings flag what is wrong with the lock: no TTL, several
	// holders, not a lock at all, a fair queue's timed-out head.
	Warnings []string `json:"warnings"`
}

// holder is one field of the lock hash.
type holder struct {
	Field    string `json:"field"`
	ClientID string `json:"client_id"`
	OwnerID  string `json:"owner_id"`
	Count    int64  `json:"count"`
	// Value is the raw value when it is not an integer (not a lock).
	Value string `json:"value,omitempty"`
	// Kind is a read-write lock holder's half: "read" or "write".
	Kind string `json:"kind,omitempty"`
	// Host and PID are decoded from a client id made by the rlock CLI,
	// "<host>-<pid>-<random>": the machine and process holding the lock.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
}

// redissonField matches Redisson's holder field: a client id (Redisson's
// UUID, or any other: Redisson never parses it), ':', an integer.
var redissonField = regexp.MustCompile(`^.+:-?[0-9]+$`)

// inspectMain is "rlock inspect".
func inspectMain(args []string) error {
	var o inspectOptions
	fs := newInspectFlags(&o)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0 || pos[0] == "":
		return usagef("inspect: give the lock NAME")
	case len(pos) > 1:
		return usagef("inspect: one lock NAME, got %d arguments", len(pos))
	}
	if err := checkName("inspect", pos[0]); err != nil {
		return err
	}
	conn, err := o.conn.resolve()
	if err != nil {
		return err
	}
	if len(conn.masters) > 1 {
		return usagef("inspect: one --addr at a time (inspect each master of a RedLock separately), or --cluster for the seeds of one cluster")
	}
	if o.verbose {
		o.conn.printWarnings(conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout+5*time.Second)
	defer cancel()
	info, err := inspect(ctx, conn.masters[0], pos[0])
	if err != nil {
		code := exitError
		switch {
		case errors.Is(err, lock.ErrInvalid):
			code = exitUsage
		case isAuthError(err):
			code = exitAuth
		case isMoved(err):
			code = exitUsage
		case isNetError(err):
			code = exitUnavailable
		}
		return exitWith(code, withHint(connectHint(err, conn.masters[0].TLS != nil)))
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(info); err != nil {
			return err
		}
	} else {
		printInfo(os.Stdout, info)
	}
	if notALock(info) {
		return exitWith(exitDataErr, nil) // said in the output
	}
	return nil
}

// notALock reports a key that is not a lock: another type than a hash,
// or a hash of other fields.
func notALock(info *lockInfo) bool { return info.NotLock != "" }

// isAuthError reports Redis refusing the credentials.
func isAuthError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "WRONGPASS") || strings.Contains(s, "NOAUTH") || strings.Contains(s, "NOPERM")
}

// isNetError reports a failure to reach Redis (not an error reply).
func isNetError(err error) bool {
	var re *rueidis.RedisError
	return !errors.As(err, &re)
}

// warn adds the warnings that info calls for.
func warn(info *lockInfo) {
	switch {
	case notALock(info):
		info.Warnings = append(info.Warnings, fmt.Sprintf(
			"not a lock: %s; it holds other data under this name: rlock run exits 65 on it, and Redisson's locks fail on it or take it for held. Lock another name", info.NotLock))
		return
	case !info.Locked:
		return
	}
	if info.TTLMillis == -1 {
		info.Warnings = append(info.Warnings,
			"the lock has no TTL: it never expires, so if its holder is gone, blocking waiters wait forever (PEXPIRE it, or DEL it once its holder is known to be gone)")
	}
	writers := 0
	for _, h := range info.Holders {
		if h.Kind == "write" {
			writers++
		}
	}
	switch {
	case info.Mode != "" && writers > 1:
		info.Warnings = append(info.Warnings, fmt.Sprintf(
			"%d writers: a read-write lock has one writer at a time, so it is corrupt", writers))
	case info.Mode == "" && len(info.Holders) > 1:
		info.Warnings = append(info.Warnings, fmt.Sprintf(
			"%d holders: a lock has one holder at a time, so something other than an RLock wrote this key, or it is corrupt", len(info.Holders)))
	}
}

// inspect reads everything about the lock name in one round trip (in a
// cluster, one per node for the subscribers of the unlock channel).
func inspect(ctx context.Context, lc lock.Config, name string) (*lockInfo, error) {
	opt := rueidis.ClientOption{
		InitAddress:       lc.Addrs,
		Username:          lc.Username,
		Password:          lc.Password,
		TLSConfig:         lc.TLS,
		SelectDB:          lc.DB,
		ForceSingleClient: !lc.Cluster && lc.MasterSet == "",
		DisableCache:      true,
		Dialer:            net.Dialer{Timeout: dialTimeout},
		ConnWriteTimeout:  dialTimeout,
	}
	where := strings.Join(lc.Addrs, ",")
	if lc.MasterSet != "" {
		opt.Sentinel = rueidis.SentinelOption{MasterSet: lc.MasterSet, Username: lc.SentinelUsername, Password: lc.SentinelPassword,
			TLSConfig: lc.TLS, Dialer: net.Dialer{Timeout: dialTimeout}}
		where = fmt.Sprintf("master set %s via %s", lc.MasterSet, where)
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		if isAuthError(err) { // worded as run words it
			return nil, fmt.Errorf("connect on %s: %w: %w", where, lock.ErrAuth, err)
		}
		return nil, fmt.Errorf("connect on %s: %w", where, err)
	}
	defer rc.Close()
	if lc.Cluster && rc.Mode() != rueidis.ClientModeCluster {
		return nil, fmt.Errorf("%w: --cluster, but %s is not a cluster node (cluster-enabled no)", lock.ErrInvalid, where)
	}
	addr, role, err := answering(ctx, rc, lc, name, where)
	if err != nil {
		return nil, err
	}

	info := &lockInfo{
		Name: name, Addr: addr, Holders: []holder{}, Warnings: []string{},
		Channel: reentrant.ChannelName(name), TokenKey: reentrant.TokenName(name),
		ServerRole: role,
	}
	rwChannel := reentrant.RWChannelName(name)
	b := rc.B()
	res := rc.DoMulti(ctx,
		b.Type().Key(name).Build(),
		b.Pttl().Key(name).Build(),
		b.Hgetall().Key(name).Build(),
		b.Get().Key(info.TokenKey).Build(),
		b.PubsubNumsub().Channel(info.Channel).Build(),
		b.PubsubShardnumsub().Channel(info.Channel).Build(),
		b.PubsubNumsub().Channel(rwChannel).Build(),
		b.PubsubShardnumsub().Channel(rwChannel).Build(),
		b.Lrange().Key(reentrant.FairQueueName(name)).Start(0).Stop(-1).Build(),
		b.Zrange().Key(reentrant.FairTimeoutName(name)).Min("0").Max("-1").Withscores().Build(),
	)
	now := time.Now()
	if info.Type, err = res[0].ToString(); err != nil {
		return nil, fmt.Errorf("TYPE %s on %s: %w", name, addr, err)
	}
	if info.TTLMillis, err = res[1].AsInt64(); err != nil {
		return nil, fmt.Errorf("PTTL %s on %s: %w", name, addr, err)
	}
	if info.Type == "hash" {
		fields, err := res[2].AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("HGETALL %s on %s: %w", name, addr, err)
		}
		_, info.NotLock = hashLayout(fields)
		info.Locked = len(fields) > 0 && info.NotLock == ""
		if mode, rw := fields["mode"]; rw {
			// Redisson's read-write lock: its own channel.
			info.Mode, info.Channel = mode, rwChannel
			res[4], res[5] = res[6], res[7]
			info.Holders, info.Redisson = rwHolders(fields)
		} else {
			info.Holders, info.Redisson = holders(fields)
		}
		if info.NotLock != "" {
			// Someone's data: its fields are no holders.
			info.Holders, info.Redisson, info.Mode = []holder{}, false, ""
		}
	}
	if info.Type != "hash" && info.Type != "none" {
		if info.PartOf, info.Role, _ = partOf(name, info.Type); info.Role == "" {
			info.NotLock = "the key is a " + info.Type
		}
	}
	if s, err := res[3].ToString(); err == nil {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			info.FenceToken = &n
		}
	} else if !rueidis.IsRedisNil(err) {
		if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
			return nil, fmt.Errorf("GET %s on %s: %w", info.TokenKey, addr, err)
		}
		// WRONGTYPE: not a token counter; reported as absent.
	}
	if n, err := numsub(res[4], info.Channel); err != nil {
		return nil, fmt.Errorf("PUBSUB NUMSUB on %s: %w", addr, err)
	} else {
		info.Subscribers = n
	}
	if lc.Cluster {
		// Each node counts only its own subscribers (PUBSUB NUMSUB went to
		// any one of them): add up every node's.
		if info.Subscribers, err = clusterNumsub(ctx, rc, info.Channel); err != nil {
			return nil, err
		}
	}
	if n, err := numsub(res[5], info.Channel); err == nil {
		info.ShardSubscribers = &n
	} else if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
		return nil, fmt.Errorf("PUBSUB SHARDNUMSUB on %s: %w", addr, err)
	} // else: unknown subcommand, Redis < 7
	if q, err := fairQueue(res[8], res[9], now); err == nil && len(q) > 0 {
		info.QueueKey, info.FairQueue = reentrant.FairQueueName(name), q
	} else if err != nil {
		if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
			return nil, fmt.Errorf("LRANGE %s on %s: %w", reentrant.FairQueueName(name), addr, err)
		}
		// WRONGTYPE: not a fair queue; reported as absent.
	}
	warn(info)
	warnFair(info)
	return info, nil
}

// holders parses the lock hash; ok reports Redisson's layout.
func holders(fields map[string]string) (hs []holder, ok bool) {
	ok = len(fields) > 0
	hs = make([]holder, 0, len(fields))
	for f, v := range fields {
		h := holder{Field: f}
		h.ClientID, h.OwnerID, _ = splitField(f)
		if host, pid, ok := parseClientID(h.ClientID); ok {
			h.Host, h.PID = host, pid
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			h.Value = v
			ok = false
		}
		h.Count = n
		if !redissonField.MatchString(f) {
			ok = false
		}
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Field < hs[j].Field })
	return hs, ok
}

// rwHolders parses a read-write lock's hash: the field "mode" ("read" or
// "write"), readers "<client id>:<owner id>" and writers
// "<client id>:<owner id>:write" with their hold counts; ok reports
// Redisson's layout.
func rwHolders(fields map[string]string) (hs []holder, ok bool) {
	mode := fields["mode"]
	ok = mode == "read" || mode == "write"
	hs = make([]holder, 0, len(fields))
	for f, v := range fields {
		if f == "mode" {
			continue
		}
		base := strings.TrimSuffix(f, ":write")
		one, fine := holders(map[string]string{base: v})
		h := one[0]
		h.Field, h.Kind = f, "read"
		if base != f {
			h.Kind = "write"
		}
		ok = ok && fine
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].Field < hs[j].Field })
	return hs, ok
}

// clusterNumsub adds up PUBSUB NUMSUB of channel over every node of the
// cluster rc.
func clusterNumsub(ctx context.Context, rc rueidis.Client, channel string) (int64, error) {
	var total int64
	for addr, node := range rc.Nodes() {
		n, err := numsub(node.Do(ctx, node.B().PubsubNumsub().Channel(channel).Build()), channel)
		if err != nil {
			return 0, fmt.Errorf("PUBSUB NUMSUB on %s: %w", addr, err)
		}
		total += n
	}
	return total, nil
}

// numsub reads the count of channel from a PUBSUB (SHARD)NUMSUB reply:
// [channel, count].
func numsub(r rueidis.RedisResult, channel string) (int64, error) {
	vals, err := r.ToArray()
	if err != nil {
		return 0, err
	}
	if len(vals) != 2 {
		return 0, errors.New("unexpected reply")
	}
	if ch, err := vals[0].ToString(); err != nil || ch != channel {
		return 0, errors.New("unexpected reply")
	}
	return vals[1].AsInt64()
}

// printInfo prints info as text.
func printInfo(w io.Writer, info *lockInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch {
	case info.Locked:
		fmt.Fprintf(tw, "lock %q on %s: locked\n", info.Name, info.Addr)
	case info.Type == "none":
		fmt.Fprintf(tw, "lock %q on %s: not locked\n", info.Name, info.Addr)
	case info.Role != "" && info.PartOf != "":
		fmt.Fprintf(tw, "key %q on %s: a %s, part of lock %q: %s (rlock inspect %s shows the lock)\n",
			info.Name, info.Addr, info.Type, info.PartOf, info.Role, shellQuote(info.PartOf))
	case info.Role != "":
		fmt.Fprintf(tw, "key %q on %s: a %s, part of a lock: %s\n", info.Name, info.Addr, info.Type, info.Role)
	default:
		fmt.Fprintf(tw, "lock %q on %s: not a lock: %s\n", info.Name, info.Addr, info.NotLock)
	}
	if info.Locked {
		layout := "not Redisson's RLock (fields are not \"<client id>:<integer>\" with integer counts)"
		switch {
		case info.Mode != "" && info.Redisson:
			layout = fmt.Sprintf("Redisson RReadWriteLock, mode %s (hash of \"mode\", readers \"<client id>:<owner id>\" and writer \"<client id>:<owner id>:write\" -> hold count)", info.Mode)
		case info.Mode != "":
			layout = fmt.Sprintf("not Redisson's RReadWriteLock (mode %q; fields are not \"<client id>:<integer>[:write]\" with integer counts)", info.Mode)
		case info.Redisson:
			layout = "Redisson RLock (hash of \"<client id>:<owner id>\" -> hold count)"
		}
		fmt.Fprintf(tw, "  layout:\t%s\n", layout)
		fmt.Fprintf(tw, "  ttl:\t%s\n", ttlString(info.TTLMillis))
		fmt.Fprintf(tw, "  holders:\t%d\n", len(info.Holders))
		for _, h := range info.Holders {
			count := strconv.FormatInt(h.Count, 10)
			if h.Value != "" {
				count = strconv.Quote(h.Value)
			}
			what := map[string]string{"": "holder", "read": "reader", "write": "writer"}[h.Kind]
			fmt.Fprintf(tw, "    %s:\tclient %s  owner %s  hold count %s\n", what, orDash(h.ClientID), orDash(h.OwnerID), count)
			if h.Host != "" {
				fmt.Fprintf(tw, "    \trlock on host %s, pid %d\n", h.Host, h.PID)
			}
			fmt.Fprintf(tw, "    \tfield %s\n", h.Field)
		}
	}
	if info.ServerRole == "replica" {
		fmt.Fprintf(tw, "  server:\ta replica: rlock run there fails with READONLY; give the master's address (or --sentinel-master)\n")
	}
	printFair(tw, info)
	fmt.Fprintf(tw, "  channel:\t%s\n", info.Channel)
	shard := "n/a (Redis < 7)"
	if info.ShardSubscribers != nil {
		shard = strconv.FormatInt(*info.ShardSubscribers, 10)
	}
	fmt.Fprintf(tw, "  waiting:\t%d subscribed connections (PUBSUB NUMSUB), %s sharded (SHARDNUMSUB)\n", info.Subscribers, shard)
	if info.FenceToken != nil {
		fmt.Fprintf(tw, "  fence token:\t%d (%s)\n", *info.FenceToken, info.TokenKey)
	} else {
		fmt.Fprintf(tw, "  fence token:\tnone (%s does not exist)\n", info.TokenKey)
	}
	for _, w := range info.Warnings {
		fmt.Fprintf(tw, "  warning:\t%s\n", w)
	}
}

func ttlString(ms int64) string {
	switch ms {
	case -1:
		return "none (the key never expires)"
	case -2:
		return "none (no key)"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// answering names the server that holds name's key, for inspect's
// output: in a cluster, the master owning the key's slot (CLUSTER
// KEYSLOT, CLUSTER SLOTS), not the seed asked; through Sentinel, the
// master the sentinels gave; else the address asked, with role
// "replica" when ROLE says so.
func answering(ctx context.Context, rc rueidis.Client, lc lock.Config, name, where string) (addr, role string, err error) {
	b := rc.B()
	switch {
	case lc.Cluster:
		slot, err := rc.Do(ctx, b.ClusterKeyslot().Key(name).Build()).AsInt64()
		if err != nil {
			return "", "", fmt.Errorf("CLUSTER KEYSLOT on %s: %w", where, err)
		}
		ranges, err := rc.Do(ctx, b.ClusterSlots().Build()).ToArray()
		if err != nil {
			return "", "", fmt.Errorf("CLUSTER SLOTS on %s: %w", where, err)
		}
		for _, r := range ranges {
			v, err := r.ToArray()
			if err != nil || len(v) < 3 {
				continue
			}
			lo, _ := v[0].AsInt64()
			hi, _ := v[1].AsInt64()
			if slot < lo || slot > hi {
				continue
			}
			node, err := v[2].ToArray()
			if err != nil || len(node) < 2 {
				break
			}
			host, _ := node[0].ToString()
			port, _ := node[1].AsInt64()
			return net.JoinHostPort(host, strconv.FormatInt(port, 10)), "", nil
		}
		return where, "", nil // no node owns the slot: the seed asked
	case lc.MasterSet != "":
		for a := range rc.Nodes() {
			return fmt.Sprintf("%s (master of set %s, via %s)", a, lc.MasterSet, strings.Join(lc.Addrs, ",")), "", nil
		}
		return where, "", nil
	}
	v, err := rc.Do(ctx, b.Role().Build()).ToArray()
	if err == nil && len(v) > 0 {
		if r, _ := v[0].ToString(); r == "slave" {
			return where, "replica", nil
		}
	}
	return where, "", nil // ROLE refused (an ACL): said nothing of it
}
