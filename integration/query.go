package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rlock-go/rlock/integration/internal/backendkit"
)

// query sends one command to addr (after AUTH when password is set) and
// returns its RESP2 reply: a string for a simple string, an integer or a
// bulk string, nil for a null, []any for an array. An error reply is
// returned as an error. It speaks RESP by hand, like command, so that
// polling a deployment's state starts no client goroutines.
func query(ctx context.Context, addr, password string, args ...string) (any, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rlock: integration: %s: %w", addr, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r := bufio.NewReader(conn)
	if password != "" {
		if err := backendkit.RoundTrip(conn, r, "+OK", "AUTH", password); err != nil {
			return nil, fmt.Errorf("rlock: integration: %s: %w", addr, err)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, fmt.Errorf("rlock: integration: %s: %w", addr, err)
	}
	v, err := readValue(r, 0)
	if err != nil {
		return nil, fmt.Errorf("rlock: integration: %s %s: %w", addr, strings.Join(args, " "), err)
	}
	return v, nil
}

// replyError is an error reply, kept as a value inside an array.
type replyError string

func (e replyError) Error() string { return string(e) }

// readValue reads one RESP2 value. An error reply is a replyError value,
// returned as the error at the top level and kept as an element inside
// an array; err is otherwise a failure to read.
func readValue(r *bufio.Reader, depth int) (any, error) {
	if depth > respMaxDepth {
		return nil, errMalformed
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errMalformed
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		if depth == 0 {
			return nil, replyError(line[1:])
		}
		return replyError(line[1:]), nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n > respMaxBulk {
			return nil, errMalformed
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return nil, errMalformed
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, 0, min(n, 1024))
		for range n {
			v, err := readValue(r, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, errMalformed
}

// fields reads a flat array of alternating names and values, as
// SENTINEL MASTER and each entry of SENTINEL REPLICAS answer, into a map.
func fields(v any) map[string]string {
	a, _ := v.([]any)
	m := make(map[string]string, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		k, _ := a[i].(string)
		s, _ := a[i+1].(string)
		m[k] = s
	}
	return m
}

// infoFields reads an INFO reply's "name:value" lines into a map.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for line := range strings.SplitSeq(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
