package redissonconfig

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/rlock-go/rlock/lock"
)

// Warning is a setting of the config that Load did not use, or used only
// in part, and why. A warning never changes what the locks exclude.
type Warning struct {
	// Line is the setting's line in the file, from 1.
	Line int
	// Key is the setting's path, such as "singleServerConfig.retryAttempts".
	Key string
	// Reason says why it is not used, or what rlock does instead.
	Reason string
	// Differs reports a setting whose being unused (or used otherwise)
	// makes rlock behave differently from Redisson with this config:
	// readMode and subscriptionMode, a Java keystore, an unverified TLS
	// certificate, the sentinels' password. The others (pool sizes,
	// retries, threads, codecs, ...) change nothing the locks do.
	Differs bool
}

func (w Warning) String() string {
	if w.Differs {
		return fmt.Sprintf("line %d: %s: differs from Redisson: %s", w.Line, w.Key, w.Reason)
	}
	return fmt.Sprintf("line %d: %s: %s", w.Line, w.Key, w.Reason)
}

// Error is a problem that makes Load refuse the config: malformed YAML, a
// value of the wrong type, or a value rlock refuses (with the reason).
// It matches lock.ErrInvalid. Load's error holds one Error per problem:
// errors.As finds the first.
type Error struct {
	// Line is the problem's line in the file, from 1; 0 when it has none
	// (an empty file).
	Line int
	// Key is the setting's path, "" when the problem is not one
	// setting's.
	Key string
	// Reason says what is wrong and, for a value rlock refuses, why.
	Reason string
}

func (e *Error) Error() string { return "rlock: redisson config: " + e.text() }

func (e *Error) text() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap returns lock.ErrInvalid.
func (e *Error) Unwrap() error { return lock.ErrInvalid }

// problems are several Errors, printed on one line.
type problems []*Error

func (p problems) Error() string {
	parts := make([]string, len(p))
	for i, e := range p {
		parts[i] = e.text()
	}
	return "rlock: redisson config: " + strings.Join(parts, "; ")
}

func (p problems) Unwrap() []error {
	errs := make([]error, len(p))
	for i, e := range p {
		errs[i] = e
	}
	return errs
}

// Option changes how Load reads a config.
type Option func(*options)

type options struct {
	mapperClass string
	mapper      func(string) string
	set         bool
}

// WithNameMapper supplies the Go equivalent of the config's nameMapper:
// class is the Java class the config names (as in nameMapper:
// !<com.example.PrefixMapper> {...}) and mapper must map every name as
// that class does, with the same settings. Load refuses a config whose
// nameMapper is another class, or that names none: with different
// mappings, Java and Go services would lock different keys and not
// exclude each other.
func WithNameMapper(class string, mapper func(name string) string) Option {
	return func(o *options) { o.mapperClass, o.mapper, o.set = class, mapper, true }
}

// defaultNameMapper is Redisson's identity mapper.
const defaultNameMapper = "org.redisson.config.DefaultNameMapper"

// Load reads a Redisson YAML config (what Redisson's Config.fromYAML
// reads) into a lock.Config, and lists the settings it did not use as
// warnings. The config has one of singleServerConfig,
// sentinelServersConfig or clusterServersConfig; see the package
// documentation for what each setting becomes. Variables ${NAME} and
// ${NAME:-default} are replaced from the environment first, as Redisson
// does.
//
// A malformed file, a value of the wrong type, a mode rlock does not
// support, and a value rlock refuses (a lockWatchdogTimeout below
// lock.MinLease, a timeout that could outlast a lease, a nameMapper
// without its Go equivalent) are errors matching lock.ErrInvalid that
// give the line and the reason (*Error). The returned Config is then
// zero; the warnings found so far are returned either way.
//
// May return an error matching lock.ErrInvalid.
func Load(data []byte, opts ...Option) (lock.Config, []Warning, error) {
	l := &loader{}
	for _, opt := range opts {
		if opt == nil {
			return lock.Config{}, nil, &Error{Reason: "nil Option"}
		}
		opt(&l.opts)
	}
	if l.opts.set && (l.opts.mapperClass == "" || l.opts.mapper == nil) {
		return lock.Config{}, nil, &Error{Reason: "WithNameMapper needs a class name and a mapper"}
	}
	text := l.substitute(string(data))
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return lock.Config{}, l.warnings, yamlError(err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return lock.Config{}, l.warnings, &Error{Reason: "empty config: want one of singleServerConfig, sentinelServersConfig, clusterServersConfig"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return lock.Config{}, l.warnings, &Error{Line: root.Line, Reason: "want a mapping of Redisson settings"}
	}
	l.readTop(root)
	if len(l.errs) == 0 {
		l.resolve()
	}
	slices.SortStableFunc(l.warnings, func(a, b Warning) int { return a.Line - b.Line })
	slices.SortStableFunc(l.errs, func(a, b *Error) int { return a.Line - b.Line })
	switch len(l.errs) {
	case 0:
		return l.cfg, l.warnings, nil
	case 1:
		return lock.Config{}, l.warnings, l.errs[0]
	}
	return lock.Config{}, l.warnings, l.errs
}

// yamlLine finds the line in a YAML parser's message.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError is the *Error of a YAML parse error, with its line.
func yamlError(err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{Line: n, Reason: "malformed YAML: " + m[2]}
	}
	return &Error{Reason: "malformed YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

// setting is a value read from the file, with where it was.
type setting struct {
	key  string // its path
	line int
	node *yaml.Node
}

func (s *setting) given() bool { return s != nil }

// loader reads one config.
type loader struct {
	opts     options
	cfg      lock.Config
	warnings []Warning
	errs     problems

	mode    *setting // the servers config used
	modeKey string   // its key: singleServerConfig, ...

	// Settings read at the top level (top) and in the servers config
	// (server, Redisson's deprecated place for them): the top level's
	// win, as in Redisson.
	top, server map[string]*setting
	mine        map[string]*setting // the servers config's own settings
}

func (l *loader) warn(line int, key, reason string) {
	l.warnings = append(l.warnings, Warning{Line: line, Key: key, Reason: reason})
}

// warnDiffers is warn for a setting that makes rlock differ from
// Redisson (Warning.Differs).
func (l *loader) warnDiffers(line int, key, reason string) {
	l.warnings = append(l.warnings, Warning{Line: line, Key: key, Reason: reason, Differs: true})
}

// differs are the settings that unused make rlock behave differently
// from Redisson.
var differs = map[string]bool{"readMode": true, "subscriptionMode": true, "sslTruststore": true, "sslKeystore": true}

func (l *loader) fail(line int, key, format string, args ...any) {
	l.errs = append(l.errs, &Error{Line: line, Key: key, Reason: fmt.Sprintf(format, args...)})
}

// Settings read at the top level and, deprecated there, in the servers
// config.
var shared = map[string]bool{
	"username": true, "password": true, "nameMapper": true,
	"sslVerificationMode": true, "sslEnableEndpointIdentification": true,
	"sslTruststore": true, "sslTruststorePassword": true, "sslKeystore": true,
	"sslKeystorePassword": true, "sslKeystoreType": true, "sslProvider": true,
	"sslProtocols": true, "sslCiphers": true,
}

// Settings only at the top level.
var topOnly = map[string]bool{"lockWatchdogTimeout": true, "checkLockSyncedSlaves": true, "slavesSyncTimeout": true, "fairLockWaitTimeout": true}

// Settings of each servers config, besides the shared ones.
var modeKeys = map[string]map[string]bool{
	"singleServerConfig":    {"address": true, "database": true, "timeout": true, "connectTimeout": true},
	"sentinelServersConfig": {"sentinelAddresses": true, "masterName": true, "sentinelUsername": true, "sentinelPassword": true, "database": true, "timeout": true, "connectTimeout": true},
	"clusterServersConfig":  {"nodeAddresses": true, "shardedSubscriptionMode": true, "database": true, "timeout": true, "connectTimeout": true},
}

// Why some settings rlock does not use are not used.
var unusedWhy = map[string]string{
	"retryAttempts":         "rlock retries a command within its CommandTimeout and the lease, on its own schedule",
	"retryInterval":         "rlock retries a command within its CommandTimeout and the lease, on its own schedule",
	"retryDelay":            "rlock retries a command within its CommandTimeout and the lease, on its own schedule",
	"reconnectionDelay":     "rlock reconnects on its own schedule",
	"lockWatchdogBatchSize": "rlock renews every lock a Client holds on a master in one round trip",
	"codec":                 "lock names and values are plain strings on both sides, whatever the codec",
	"readMode":              "rlock reads from the master only",
	"subscriptionMode":      "rlock subscribes on the master; unlock messages reach the subscribers of replicas and master alike",
	"sslProtocols":          "Go's TLS defaults apply (TLS 1.2 and later)",
	"sslCiphers":            "Go's TLS defaults apply",
	"sslProvider":           "Go's own TLS is used",
	"sslKeystoreType":       "rlock reads no Java keystore",
	"sslTruststorePassword": "rlock reads no Java keystore",
	"sslKeystorePassword":   "rlock reads no Java keystore",
	"sslTruststore": "a Java keystore (JKS or PKCS#12), which rlock cannot read: the server's certificate is verified " +
		"against the system roots unless the CA is given as PEM (rlock run --tls-ca FILE; in Go, Config.TLS.RootCAs)",
	"sslKeystore": "a Java keystore (JKS or PKCS#12), which rlock cannot read: no client certificate is sent " +
		"unless it is given as PEM (rlock run --tls-cert FILE --tls-key FILE; in Go, Config.TLS.Certificates)",
}

// Servers configs rlock does not support, and what to use instead.
var otherModes = map[string]string{
	"replicatedServersConfig":    "use singleServerConfig with the master's address",
	"masterSlaveServersConfig":   "use singleServerConfig with masterAddress: rlock locks on the master only",
	"proxyServersConfig":         "use singleServerConfig with the proxy's address",
	"multiClusterServersConfig":  "use clusterServersConfig with one cluster",
	"multiSentinelServersConfig": "use sentinelServersConfig with one sentinel set",
}

// readTop reads the top-level mapping.
func (l *loader) readTop(root *yaml.Node) {
	l.top = map[string]*setting{}
	l.eachKey(root, "", func(key string, s *setting) {
		switch {
		case modeKeys[key] != nil:
			if l.mode != nil {
				l.fail(s.line, key, "a second servers config (%s is given too): give one", l.modeKey)
				return
			}
			if s.node.Kind != yaml.MappingNode {
				l.fail(s.line, key, "want a mapping of settings")
				return
			}
			l.mode, l.modeKey = s, key
		case otherModes[key] != "":
			l.fail(s.line, key, "not supported by rlock: %s", otherModes[key])
		case strings.HasSuffix(key, "ServersConfig"):
			l.fail(s.line, key, "not supported by rlock: use singleServerConfig, sentinelServersConfig or clusterServersConfig")
		case shared[key] || topOnly[key]:
			l.top[key] = s
		default:
			l.unused(s)
		}
	})
	if l.mode == nil && len(l.errs) == 0 {
		l.fail(root.Line, "", "no servers config: want one of singleServerConfig, sentinelServersConfig, clusterServersConfig")
		return
	}
	if l.mode == nil {
		return
	}
	l.server, l.mine = map[string]*setting{}, map[string]*setting{}
	l.eachKey(l.mode.node, l.modeKey+".", func(key string, s *setting) {
		switch {
		case modeKeys[l.modeKey][key]:
			l.mine[key] = s
		case shared[key]:
			l.server[key] = s
		default:
			l.unused(s)
		}
	})
}

// eachKey calls f for each key of the mapping m whose value is not null
// (null is Redisson's "not set"), in order; a key given twice is an
// error.
func (l *loader) eachKey(m *yaml.Node, prefix string, f func(key string, s *setting)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			l.fail(k.Line, prefix+"?", "a key that is not a name")
			continue
		}
		if seen[k.Value] {
			l.fail(k.Line, prefix+k.Value, "given twice: give it once")
			continue
		}
		seen[k.Value] = true
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		f(k.Value, &setting{key: prefix + k.Value, line: k.Line, node: v})
	}
}

// unused warns of a setting rlock does not use.
func (l *loader) unused(s *setting) {
	leaf := s.key[strings.LastIndexByte(s.key, '.')+1:]
	why, ok := unusedWhy[leaf]
	if !ok {
		why = "not used by rlock"
	}
	if differs[leaf] {
		l.warnDiffers(s.line, s.key, why)
		return
	}
	l.warn(s.line, s.key, why)
}

// pick returns the setting name: the top level's, else the servers
// config's (Redisson's deprecated place), as Redisson picks it.
func (l *loader) pick(name string) *setting {
	if s := l.top[name]; s != nil {
		if d := l.server[name]; d != nil {
			l.warn(d.line, d.key, "not used: the top-level "+name+" wins, as in Redisson")
		}
		return s
	}
	return l.server[name]
}

// Value readers: each records an error and returns false for a value of
// the wrong type.

func (l *loader) str(s *setting) (string, bool) {
	if s.node.Kind != yaml.ScalarNode {
		l.fail(s.line, s.key, "want a string")
		return "", false
	}
	return s.node.Value, true
}

func (l *loader) integer(s *setting) (int64, bool) {
	if s.node.Kind == yaml.ScalarNode && s.node.Tag == "!!int" {
		if n, err := strconv.ParseInt(s.node.Value, 0, 64); err == nil {
			return n, true
		}
	}
	l.fail(s.line, s.key, "want a whole number, got %q", s.node.Value)
	return 0, false
}

// millis reads Redisson's milliseconds.
func (l *loader) millis(s *setting) (time.Duration, bool) {
	n, ok := l.integer(s)
	if !ok {
		return 0, false
	}
	if n <= 0 || n > int64(time.Duration(1<<63-1)/time.Millisecond) {
		l.fail(s.line, s.key, "%d ms: want a positive number of milliseconds", n)
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

func (l *loader) boolean(s *setting) (bool, bool) {
	if s.node.Kind == yaml.ScalarNode {
		switch strings.ToLower(s.node.Value) {
		case "true", "yes", "on":
			return true, true
		case "false", "no", "off":
			return false, true
		}
	}
	l.fail(s.line, s.key, "want true or false, got %q", s.node.Value)
	return false, false
}

func (l *loader) strings(s *setting) ([]string, bool) {
	if s.node.Kind != yaml.SequenceNode {
		l.fail(s.line, s.key, "want a list")
		return nil, false
	}
	var out []string
	for _, n := range s.node.Content {
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			l.fail(n.Line, s.key, "want a list of strings")
			return nil, false
		}
		out = append(out, n.Value)
	}
	return out, true
}

// enum reads one of values (case-insensitively), returned as listed.
func (l *loader) enum(s *setting, values ...string) (string, bool) {
	if s.node.Kind == yaml.ScalarNode {
		for _, v := range values {
			if strings.EqualFold(s.node.Value, v) {
				return v, true
			}
		}
	}
	l.fail(s.line, s.key, "want one of %s, got %q", strings.Join(values, ", "), s.node.Value)
	return "", false
}
