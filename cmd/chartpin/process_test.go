package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/atomicfile"
	"github.com/chartpin/chartpin/internal/chartfile"
)

// Tests that need chartpin as a process of its own (killed, signalled, two
// at once) run this test binary again as chartpin: TestMain hands it to
// chartpinProcess.
const asChartpin = "CHARTPIN_TEST_AS_CHARTPIN"

// chartpinProcess is main with the test seams: every write step (the renames
// of atomicfile) is reported on stderr as "step N: STAGE FILE", and with
// CHARTPIN_TEST_PAUSE=N the Nth step waits for stdin to close (the test kills
// or signals the process there). CHARTPIN_TEST_LOCK_WAIT shortens the wait
// for another run's lock.
func chartpinProcess() {
	if d, err := time.ParseDuration(os.Getenv("CHARTPIN_TEST_LOCK_WAIT")); err == nil {
		chartfile.LockWait = d
	}
	pause, _ := strconv.Atoi(os.Getenv("CHARTPIN_TEST_PAUSE"))
	n := 0
	atomicfile.Hook = func(stage, name string) {
		n++
		fmt.Fprintf(os.Stderr, "step %d: %s %s\n", n, stage, name)
		if n == pause {
			fmt.Fprintf(os.Stderr, "paused at step %d\n", n)
			_, _ = io.Copy(io.Discard, os.Stdin)
		}
	}
	main()
}

// process is one chartpin process started by a test.
type process struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	read   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
	stdout strings.Builder
}

// startChartpin starts chartpin with args and extra environment. A process
// still running when the test ends is killed.
func startChartpin(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	// A guard against a hang, not a measure of speed.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asChartpin+"=1", "GITHUB_ACTIONS="), env...)
	p := &process{cmd: cmd, lines: make(chan string, 10000), read: make(chan struct{})}
	cmd.Stdout = &lockedWriter{p: p, b: &p.stdout}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			p.lines <- sc.Text()
		}
		close(p.lines)
		close(p.read)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.read
		_ = cmd.Wait()
		cancel()
	})
	return p
}

type lockedWriter struct {
	p *process
	b *strings.Builder
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.b.Write(b)
}

// waitLine waits for a stderr line starting with prefix and returns it.
func (p *process) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	for line := range p.lines {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	t.Fatalf("chartpin ended without printing %q; stderr:\n%s", prefix, p.errors())
	return ""
}

func (p *process) errors() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// wait waits for the process to end and returns its exit status (-1 when a
// signal killed it) and its stderr without the step lines.
func (p *process) wait(t *testing.T) (int, string) {
	t.Helper()
	go func() {
		for range p.lines { // keep the reader going
		}
	}()
	<-p.read
	err := p.cmd.Wait()
	var exit *exec.ExitError
	if err != nil && !asExit(err, &exit) {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(p.errors(), "\n") {
		if !strings.HasPrefix(l, "step ") && !strings.HasPrefix(l, "paused at ") {
			kept = append(kept, l)
		}
	}
	return p.cmd.ProcessState.ExitCode(), strings.Join(kept, "")
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*target = e
	return ok
}

// steps is the number of write steps a finished process reported.
func (p *process) steps() int {
	n := 0
	for _, l := range strings.Split(p.errors(), "\n") {
		if strings.HasPrefix(l, "step ") {
			n++
		}
	}
	return n
}
