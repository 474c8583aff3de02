package integration

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// respReplies has one frame of every RESP2 and RESP3 reply type.
var respReplies = []struct {
	name, raw string
	kind      byte
}{
	{"simple string", "+OK\r\n", '+'},
	{"error", "-ERR wrong\r\n", '-'},
	{"integer", ":-42\r\n", ':'},
	{"bulk string", "$5\r\nhe\r\no\r\n", '$'},
	{"empty bulk string", "$0\r\n\r\n", '$'},
	{"null bulk string", "$-1\r\n", '$'},
	{"array", "*3\r\n:1\r\n$1\r\na\r\n*1\r\n+x\r\n", '*'},
	{"empty array", "*0\r\n", '*'},
	{"null array", "*-1\r\n", '*'},
	{"null", "_\r\n", '_'},
	{"double", ",3.14\r\n", ','},
	{"double inf", ",-inf\r\n", ','},
	{"boolean", "#t\r\n", '#'},
	{"big number", "(3492890328409238509324850943850943825024385\r\n", '('},
	{"blob error", "!21\r\nSYNTAX invalid syntax\r\n", '!'},
	{"verbatim string", "=15\r\ntxt:Some string\r\n", '='},
	{"map", "%2\r\n+first\r\n:1\r\n+second\r\n*2\r\n:2\r\n_\r\n", '%'},
	{"set", "~3\r\n+a\r\n:1\r\n#f\r\n", '~'},
	{"push", ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$3\r\nhey\r\n", '>'},
	{"attribute then array", "|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*1\r\n:2039123\r\n", '*'},
	{"attribute inside array", "*2\r\n|1\r\n+ttl\r\n:3600\r\n:1\r\n:2\r\n", '*'},
	{"nested", "*2\r\n%1\r\n~1\r\n+k\r\n>1\r\n_\r\n=8\r\nmkd:a\r\nb\r\n", '*'},
	{"streamed string", "$?\r\n;4\r\nHell\r\n;1\r\no\r\n;0\r\n", '$'},
	{"streamed array", "*?\r\n:1\r\n$1\r\nx\r\n.\r\n", '*'},
	{"streamed map", "%?\r\n+a\r\n:1\r\n.\r\n", '%'},
}

func TestRESPReplyEveryType(t *testing.T) {
	for _, c := range respReplies {
		t.Run(c.name, func(t *testing.T) {
			// Followed by another frame, to show the reader stops at the end
			// of the first; bufio's smallest buffer splits the long ones.
			r := bufio.NewReaderSize(strings.NewReader(c.raw+"+NEXT\r\n"), 16)
			rep, err := readRESPReply(r)
			if err != nil {
				t.Fatalf("readRESPReply(%q): %v", c.raw, err)
			}
			if string(rep.raw) != c.raw || rep.kind != c.kind {
				t.Fatalf("readRESPReply(%q) = %q kind %q, want the frame itself, kind %q", c.raw, rep.raw, rep.kind, c.kind)
			}
			if next, err := readRESPReply(r); err != nil || string(next.raw) != "+NEXT\r\n" {
				t.Fatalf("frame after it: %q, %v", next.raw, err)
			}
			if _, err := readRESPReply(r); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestRESPReplyTruncated(t *testing.T) {
	for _, c := range respReplies {
		for n := 1; n < len(c.raw); n++ {
			rep, err := readRESPReply(bufio.NewReader(strings.NewReader(c.raw[:n])))
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s cut at %d (%q): %v, want io.ErrUnexpectedEOF", c.name, n, c.raw[:n], err)
			}
			if string(rep.raw) != c.raw[:n] {
				t.Errorf("%s cut at %d: consumed %q, want %q", c.name, n, rep.raw, c.raw[:n])
			}
		}
	}
}

func TestRESPReplyMalformed(t *testing.T) {
	for _, raw := range []string{
		"?what\r\n",
		"+OK\n",
		"\r\n",
		"$x\r\n",
		"$3\r\nabcd\r\n",
		"$-2\r\n",
		"%-1\r\n",
		"*1\r\n\r\n",
		"$?\r\n:4\r\n",
		"*?\r\n.x\r\n",
		strings.Repeat("*1\r\n", respMaxDepth+2) + ":1\r\n",
	} {
		if _, err := readRESPReply(bufio.NewReader(strings.NewReader(raw))); !errors.Is(err, errMalformed) {
			t.Errorf("readRESPReply(%.40q): %v, want errMalformed", raw, err)
		}
	}
}

func TestRESPRequest(t *testing.T) {
	frames := []struct {
		raw  string
		args []string
	}{
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\nv\r\nv\r\n", []string{"SET", "k", "v\r\nv"}},
		{"*1\r\n$4\r\nPING\r\n", []string{"PING"}},
		{"*2\r\n$3\r\nGET\r\n$0\r\n\r\n", []string{"GET", ""}},
		{"PING\r\n", []string{"PING"}},
		{"set  k\tv\n", []string{"set", "k", "v"}},
		{"\r\n", nil},
		{"*0\r\n", nil},
		{"*-1\r\n", nil},
	}
	var all strings.Builder
	for _, f := range frames {
		all.WriteString(f.raw)
	}
	r := bufio.NewReaderSize(strings.NewReader(all.String()), 16)
	for _, f := range frames {
		req, err := readRESPRequest(r)
		if err != nil {
			t.Fatalf("readRESPRequest(%q): %v", f.raw, err)
		}
		if string(req.raw) != f.raw || !slices.Equal(req.args, f.args) {
			t.Fatalf("readRESPRequest(%q) = %q %q, want %q", f.raw, req.raw, req.args, f.args)
		}
	}
	if _, err := readRESPRequest(r); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
	for _, raw := range []string{"*1\r\n:1\r\n", "*1\r\n$-1\r\n", "*1\r\n$2\r\nabc\r\n", "*x\r\n"} {
		if _, err := readRESPRequest(bufio.NewReader(strings.NewReader(raw))); !errors.Is(err, errMalformed) {
			t.Errorf("readRESPRequest(%q): %v, want errMalformed", raw, err)
		}
	}
	if _, err := readRESPRequest(bufio.NewReader(strings.NewReader("*2\r\n$3\r\nGET\r\n"))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated request: %v, want io.ErrUnexpectedEOF", err)
	}
}
