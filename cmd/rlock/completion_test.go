package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// completionScript writes "rlock completion SHELL" to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	r := runRlock(t, "completion", shell)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d; stderr: %s", r.code, r.stderr)
	}
	p := filepath.Join(t.TempDir(), "rlock."+shell)
	if err := os.WriteFile(p, []byte(r.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompletionBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := completionScript(t, "bash")
	for _, tc := range []struct {
		line string   // the words typed; the last one is completed
		want []string // among the candidates
		not  []string // not among them
	}{
		{"rlock ", []string{"run", "inspect", "demo", "completion", "help", "version"}, nil},
		{"rlock ru", []string{"run"}, []string{"inspect"}},
		{"rlock run --", []string{"--name", "--wait", "--verbose", "--quiet", "--no-fence", "--forward-all-signals", "--"}, []string{"--json"}},
		{"rlock run --wa", []string{"--wait", "--watchdog-timeout"}, []string{"--name"}},
		{"rlock run --wait ", []string{"forever", "5"}, nil},
		{"rlock run --trace ", []string{"stdout"}, nil},
		{"rlock run --name ", nil, []string{"--wait", "run"}},
		{"rlock inspect --", []string{"--json", "--addr"}, []string{"--wait"}},
		{"rlock completion ", []string{"bash", "zsh"}, nil},
		{"rlock help ", []string{"run", "inspect"}, nil},
		{"rlock run --name x -- ech", []string{"echo"}, nil},
	} {
		t.Run(tc.line, func(t *testing.T) {
			cands := bashComplete(t, bash, script, "", tc.line)
			out := strings.Join(cands, "\n")
			got := map[string]bool{}
			for _, c := range cands {
				got[c] = true
			}
			for _, w := range tc.want {
				if !got[w] {
					t.Errorf("no %q among %q", w, out)
				}
			}
			for _, w := range tc.not {
				if got[w] {
					t.Errorf("%q among %q", w, out)
				}
			}
		})
	}
}

func TestCompletionZsh(t *testing.T) {
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Skip("no zsh")
	}
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v: %s", err, out)
	}
	// Sourced after compinit, it registers _rlock for rlock.
	prog := "autoload -Uz compinit && compinit -u -d " + filepath.Join(t.TempDir(), "zcompdump") +
		"\nsource " + script + "\nprint -r -- ${_comps[rlock]}\n"
	out, err := exec.Command(zsh, "-f", "-c", prog).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_rlock" {
		t.Fatalf("%v: %q, want _rlock", err, out)
	}
}

func TestCompletionUsage(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "fish"}, {"completion", "bash", "zsh"}} {
		if r := runRlock(t, args...); r.code != exitUsage || !strings.Contains(r.stderr, "bash or zsh") {
			t.Errorf("%q: exit %d; stderr: %s", args, r.code, r.stderr)
		}
	}
}

// TestCompletionBashFilesAndDuplicates: row 19 of newcomer-2's table.
// File names after the flags that take a file; each command name once
// after "--"; flock's short options spelled -n, not --n.
func TestCompletionBashFilesAndDuplicates(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	script := completionScript(t, "bash")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(line string) []string {
		t.Helper()
		return bashComplete(t, bash, script, dir, line)
	}
	for _, flag := range []string{"--tls-ca", "--tls-cert", "--tls-key", "--redisson-config"} {
		for _, cmd := range []string{"run", "inspect"} {
			if got := complete("rlock " + cmd + " " + flag + " c"); len(got) != 1 || got[0] != "ca.pem" {
				t.Errorf("rlock %s %s c<TAB>: %q, want ca.pem", cmd, flag, got)
			}
		}
	}
	seen := map[string]int{}
	for _, c := range complete("rlock run --name x -- ech") {
		seen[c]++
	}
	if seen["echo"] != 1 {
		t.Errorf("after --, ech<TAB> offers echo %d times, want once", seen["echo"])
	}
	flags := strings.Join(complete("rlock run -"), " ")
	for _, want := range []string{"-n", "-w", "-E", "--shared"} {
		if !strings.Contains(" "+flags+" ", " "+want+" ") {
			t.Errorf("rlock run -<TAB> has no %s: %s", want, flags)
		}
	}
	if strings.Contains(" "+flags+" ", " --n ") {
		t.Errorf("rlock run -<TAB> spells -n as --n: %s", flags)
	}
}

// bashComplete completes line (its last word) with the bash completion
// script, run in dir (the test's own when empty), and returns the
// candidates. COMP_WORDS is the line as bash splits it; the function
// fills COMPREPLY, printed one candidate a line.
func bashComplete(t *testing.T, bash, script, dir, line string) []string {
	t.Helper()
	words := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		words = append(words, "")
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	prog := "source " + script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
		strconv.Itoa(len(words)-1) + "\n_rlock\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
