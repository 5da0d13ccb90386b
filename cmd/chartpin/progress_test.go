package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chartpin/chartpin/internal/registrytest"
)

// openPTY opens a pseudo-terminal pair: what is written to tty is read from pty.
func openPTY(t *testing.T) (pty, tty *os.File) {
	t.Helper()
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(pty.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(pty.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pty.Close(); tty.Close() })
	return pty, tty
}

// A run that waits on a slow registry for more than a second shows one
// updating line on a terminal stderr, and erases it; nothing of it reaches a
// pipe, and -o json shows none.
func TestProgressOnTerminal(t *testing.T) {
	reg := registrytest.New(t)
	reg.PushImage(t, "app", "1")
	proxy := registrytest.NewProxy(t, reg.Host)
	proxy.SetDelay(700 * time.Millisecond) // ping + HEAD: 1.4 s
	ref := proxy.Host + "/app:1"
	want := "chartpin: 0 of 1 refs resolved, waiting on " + proxy.Host

	pty, tty := openPTY(t)
	var terminal bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&terminal, pty); close(copied) }()
	var stdout bytes.Buffer
	code := run(context.Background(), []string{"chartpin", "resolve", ref, "--insecure-registry", proxy.Host}, &stdout, tty)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	code = run(context.Background(), []string{"chartpin", "resolve", ref, "--insecure-registry", proxy.Host, "-o", "json"}, &stdout, tty)
	if code != 0 {
		t.Fatalf("-o json: exit %d", code)
	}
	tty.Close()
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		pty.Close()
		<-copied
	}
	got := terminal.String()
	if strings.Count(got, want) != 1 || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("terminal saw %q; want the line %q once (not under -o json), erased at the end", got, want)
	}
	if !strings.Contains(stdout.String(), ref) {
		t.Errorf("stdout:\n%s", stdout.String())
	}

	var pipe bytes.Buffer
	if code := run(context.Background(), []string{"chartpin", "resolve", ref, "--insecure-registry", proxy.Host}, io.Discard, &pipe); code != 0 || pipe.Len() != 0 {
		t.Errorf("not a terminal: exit %d, stderr %q; want nothing", code, pipe.String())
	}
}
