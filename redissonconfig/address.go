package redissonconfig

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/rlock-go/rlock/lock"
)

// Address is a Redis address written as Redisson writes it:
//
//	redis://[[user]:password@]host:port[/db]
//
// with the scheme rediss:// for TLS (valkey:// and valkeys:// are the
// same). As in Redisson, the port is required, and user information of
// one part is a password (redis-cli's reading), of two parts a user and
// a password; both are URL-decoded.
type Address struct {
	// HostPort is "host:port", an IPv6 host in brackets.
	HostPort string
	// TLS is set for rediss:// and valkeys://.
	TLS bool
	// Username and Password are the URL's credentials, "" when absent.
	Username string
	Password string
	// DB is the database of a "/db" path, -1 without one. Redisson itself
	// ignores the path (its database setting chooses), and so does Load;
	// the rlock command reads it.
	DB int
}

// ParseAddress parses a redis://, rediss://, valkey:// or valkeys:// URL.
// Its errors never contain the URL's password.
//
// May return an error matching lock.ErrInvalid.
func ParseAddress(s string) (Address, error) {
	a, why := parseAddress(s)
	if why != "" {
		return Address{DB: -1}, fmt.Errorf("%w: address %q: %s", lock.ErrInvalid, Redact(s), why)
	}
	return a, nil
}

// parseAddress parses s, or says what is wrong with it.
func parseAddress(s string) (Address, string) {
	a := Address{DB: -1}
	scheme, rest, ok := strings.Cut(s, "://")
	switch {
	case !ok:
		return a, "want a URL redis://host:port or rediss://host:port"
	case scheme == "redis" || scheme == "valkey":
	case scheme == "rediss" || scheme == "valkeys":
		a.TLS = true
	case scheme == "redis+uds" || scheme == "valkey+uds":
		return a, "unix sockets are not supported: give host:port"
	default:
		return a, "unknown scheme " + strconv.Quote(scheme) + ": want redis:// or rediss://"
	}
	if strings.ContainsAny(rest, "?#") {
		return a, "unexpected query or fragment (percent-encode a '?' or '#' in a password)"
	}
	// Redisson accepts an IPv6 host without brackets ("redis://::1:6379"):
	// bracket it for net/url, as Redisson does.
	hostport, path, _ := strings.Cut(rest, "/")
	userinfo, hp, hasUser := "", hostport, false
	if i := strings.LastIndexByte(hostport, '@'); i >= 0 {
		userinfo, hp, hasUser = hostport[:i], hostport[i+1:], true
	}
	if strings.Count(hp, ":") > 1 && !strings.HasPrefix(hp, "[") {
		i := strings.LastIndexByte(hp, ':')
		hp = "[" + hp[:i] + "]" + hp[i:]
	}
	rebuilt := "redis://" + hp
	if hasUser {
		rebuilt = "redis://" + userinfo + "@" + hp
	}
	if path != "" {
		rebuilt += "/" + path
	}
	u, err := url.Parse(rebuilt)
	if err != nil {
		return a, "not a URL"
	}
	if u.Opaque != "" {
		return a, "not a URL"
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return a, "no host"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return a, "no port, or a bad one: Redisson requires host:port"
	}
	a.HostPort = net.JoinHostPort(host, port)
	if u.User != nil {
		pw, two := u.User.Password()
		if two {
			a.Username, a.Password = u.User.Username(), pw
		} else {
			a.Password = u.User.Username() // one part: a password
		}
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return a, "the path is not a database number"
		}
		a.DB = db
	}
	return a, ""
}

// Redact returns the address s with the password of its user
// information, if any, replaced by "xxxxx", for messages.
func Redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		if i := strings.LastIndexByte(s, '@'); i >= 0 {
			return "xxxxx@" + s[i+1:]
		}
		return s
	}
	hostport, path, hasPath := strings.Cut(rest, "/")
	i := strings.LastIndexByte(hostport, '@')
	if i < 0 {
		return s
	}
	user, _, two := strings.Cut(hostport[:i], ":")
	info := "xxxxx"
	if two {
		info = user + ":xxxxx"
	}
	out := scheme + "://" + info + "@" + hostport[i+1:]
	if hasPath {
		out += "/" + path
	}
	return out
}
