package integration

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The fault proxy reads RESP only to find where each command and each reply
// ends; it forwards the bytes it read unchanged.

const (
	// respMaxBulk is the longest bulk string accepted: Redis's default
	// proto-max-bulk-len.
	respMaxBulk = 512 << 20
	// respMaxLine is the longest line accepted. Redis itself refuses inline
	// commands and multibulk headers above 64 KiB; replies' simple strings
	// are shorter still.
	respMaxLine = 1 << 20
	// respMaxDepth bounds the nesting of aggregate replies.
	respMaxDepth = 128
)

// errMalformed is returned by readRESPRequest and readRESPReply when the bytes are
// not RESP as Redis writes and reads it. It never leaves the package.
var errMalformed = errors.New("rlock: integration: malformed RESP")

// request is one command read from a client.
type request struct {
	raw  []byte   // exactly the bytes read
	args []string // the command name and its arguments; empty when Redis ignores the frame
}

// reply is one reply read from a server.
type reply struct {
	raw []byte // exactly the bytes read, attributes included
	// kind is the RESP type byte of the value, after any attributes: '>'
	// for a push frame, '%' for a map, and so on.
	kind byte
}

// respReader reads one frame at a time and keeps the bytes it consumed, so
// that even a malformed or cut frame can be forwarded as it came.
type respReader struct {
	r   *bufio.Reader
	raw []byte
}

// readRESPRequest reads one command the way Redis does: a multibulk array of
// bulk strings, or else an inline command, a line split at spaces (quotes
// are not interpreted). On an error req.raw holds what was consumed; the
// error is errMalformed, io.EOF before any byte, or io.ErrUnexpectedEOF or
// the read error within a frame.
func readRESPRequest(r *bufio.Reader) (request, error) {
	p := respReader{r: r}
	return p.readRequest()
}

// readRESPReply reads one RESP2 or RESP3 reply, attributes included, with its
// nested values. Errors are those of readRESPRequest.
func readRESPReply(r *bufio.Reader) (reply, error) {
	p := respReader{r: r}
	return p.readReply()
}

// readRequest is readRESPRequest on p's reader. The raw bytes it returns
// are valid until the next read.
func (p *respReader) readRequest() (request, error) {
	p.begin()
	args, err := p.request()
	return request{raw: p.raw, args: args}, p.eof(err)
}

// readReply is readRESPReply on p's reader. The raw bytes it returns are
// valid until the next read.
func (p *respReader) readReply() (reply, error) {
	p.begin()
	kind, err := p.value(0)
	return reply{raw: p.raw, kind: kind}, p.eof(err)
}

// begin reuses the buffer of the previous frame, unless it grew large.
func (p *respReader) begin() {
	if cap(p.raw) > respMaxLine {
		p.raw = nil
	}
	p.raw = p.raw[:0]
}

// eof turns an EOF inside a frame into io.ErrUnexpectedEOF.
func (p *respReader) eof(err error) error {
	if err == io.EOF && len(p.raw) > 0 {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (p *respReader) request() ([]string, error) {
	b, err := p.r.Peek(1)
	if err != nil {
		return nil, err
	}
	if b[0] != '*' {
		line, err := p.line(false)
		if err != nil {
			return nil, err
		}
		return splitInline(line), nil
	}
	line, err := p.line(true)
	if err != nil {
		return nil, err
	}
	n, err := respInt(line[1:])
	if err != nil || n > respMaxBulk {
		return nil, errMalformed
	}
	if n <= 0 {
		return nil, nil // Redis reads "*0" and "*-1" as nothing, and answers nothing
	}
	args := make([]string, 0, min(n, 1024))
	for range n {
		line, err := p.line(true)
		if err != nil {
			return nil, err
		}
		if line[0] != '$' {
			return nil, errMalformed
		}
		size, err := respInt(line[1:])
		if err != nil || size < 0 || size > respMaxBulk {
			return nil, errMalformed
		}
		data, err := p.bulk(size)
		if err != nil {
			return nil, err
		}
		args = append(args, string(data))
	}
	return args, nil
}

// splitInline splits an inline command at spaces and tabs.
func splitInline(line []byte) []string {
	fields := bytes.Fields(line)
	if len(fields) == 0 {
		return nil // an empty line: Redis answers nothing
	}
	args := make([]string, len(fields))
	for i, f := range fields {
		args[i] = string(f)
	}
	return args
}

// value reads one value and returns its type byte; an attribute is read
// together with the value it annotates, whose type it returns.
func (p *respReader) value(depth int) (byte, error) {
	if depth > respMaxDepth {
		return 0, errMalformed
	}
	line, err := p.line(true)
	if err != nil {
		return 0, err
	}
	kind, body := line[0], line[1:]
	switch kind {
	case '+', '-', ':', '_', ',', '#', '(':
		return kind, nil
	case '$', '!', '=':
		if string(body) == "?" {
			return kind, p.streamedString()
		}
		n, err := respInt(body)
		switch {
		case err != nil || n > respMaxBulk:
			return 0, errMalformed
		case n == -1 && kind == '$':
			return kind, nil // RESP2 null bulk string
		case n < 0:
			return 0, errMalformed
		}
		_, err = p.bulk(n)
		return kind, err
	case '*', '~', '>', '%', '|':
		per := 1
		if kind == '%' || kind == '|' {
			per = 2
		}
		if string(body) == "?" {
			if err := p.streamedAggregate(depth); err != nil {
				return 0, err
			}
		} else {
			n, err := respInt(body)
			switch {
			case err != nil:
				return 0, errMalformed
			case n == -1 && kind == '*':
				return kind, nil // RESP2 null array
			case n < 0:
				return 0, errMalformed
			}
			for range n * per {
				if _, err := p.value(depth + 1); err != nil {
					return 0, err
				}
			}
		}
		if kind == '|' {
			return p.value(depth) // the annotated value follows its attribute
		}
		return kind, nil
	default:
		return 0, errMalformed
	}
}

// streamedString reads the chunks of "$?": ";<len>" frames up to ";0".
func (p *respReader) streamedString() error {
	for {
		line, err := p.line(true)
		if err != nil {
			return err
		}
		if line[0] != ';' {
			return errMalformed
		}
		n, err := respInt(line[1:])
		if err != nil || n < 0 || n > respMaxBulk {
			return errMalformed
		}
		if n == 0 {
			return nil
		}
		if _, err := p.bulk(n); err != nil {
			return err
		}
	}
}

// streamedAggregate reads the values of "*?", "%?" and the like up to ".".
func (p *respReader) streamedAggregate(depth int) error {
	for {
		b, err := p.r.Peek(1)
		if err != nil {
			return err
		}
		if b[0] == '.' {
			line, err := p.line(true)
			if err != nil {
				return err
			}
			if len(line) != 1 {
				return errMalformed
			}
			return nil
		}
		if _, err := p.value(depth + 1); err != nil {
			return err
		}
	}
}

// line reads one line and returns it without its terminator. RESP lines end
// in CRLF and are not empty; an inline command may end in a bare LF and may
// be empty.
func (p *respReader) line(strict bool) ([]byte, error) {
	start := len(p.raw)
	for {
		chunk, err := p.r.ReadSlice('\n')
		p.raw = append(p.raw, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return nil, err
		}
		if len(p.raw)-start > respMaxLine {
			return nil, errMalformed
		}
	}
	line := p.raw[start : len(p.raw)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	} else if strict {
		return nil, errMalformed
	}
	if strict && len(line) == 0 {
		return nil, errMalformed
	}
	return line, nil
}

// bulk reads n bytes and the CRLF after them, and returns the n bytes.
func (p *respReader) bulk(n int) ([]byte, error) {
	start := len(p.raw)
	p.raw = append(p.raw, make([]byte, n+2)...)
	got, err := io.ReadFull(p.r, p.raw[start:])
	if err != nil {
		p.raw = p.raw[:start+got]
		return nil, err
	}
	if p.raw[len(p.raw)-2] != '\r' || p.raw[len(p.raw)-1] != '\n' {
		return nil, errMalformed
	}
	return p.raw[start : start+n], nil
}

// respInt parses the decimal integer of a length or count line.
func respInt(b []byte) (int, error) {
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a length", errMalformed, b)
	}
	return n, nil
}
