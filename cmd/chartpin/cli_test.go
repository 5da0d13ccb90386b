package main

import (
	"bytes"
	"context"
	"io"
	"testing"
)

// runCLI runs chartpin with args as main does and returns stdout, stderr
// (with main's error line) and the exit status.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runTo(&stdout, &stderr, args)
	return stdout.String(), stderr.String(), code
}

// runCombined is runCLI with stdout and stderr in one stream, as a terminal shows them.
func runCombined(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := runTo(&out, &out, args)
	return code, out.String()
}

func runTo(stdout, stderr io.Writer, args []string) int {
	return run(context.Background(), append([]string{"chartpin"}, args...), stdout, stderr)
}
