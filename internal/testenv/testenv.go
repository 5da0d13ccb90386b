// Package testenv finds the programs integration tests run for real (git,
// docker-registry, etcd, …). A missing one skips the test loudly, or fails
// it when CHARTPIN_REQUIRE_INTEGRATION=1 (CI), so that CI never passes a
// test that did not run.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// RequireBinary returns the path of an executable (a name on PATH or an
// absolute path), or ends the test through Missing when it is absent.
func RequireBinary(t testing.TB, bin, debianPackage string) string {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err == nil {
		return path
	}
	Missing(t, fmt.Sprintf("%s not found (apt-get install -y %s)", bin, debianPackage))
	return ""
}

// Missing ends a test that cannot run because what is missing is: a loud
// skip, or a failure under CHARTPIN_REQUIRE_INTEGRATION=1.
func Missing(t testing.TB, what string) {
	t.Helper()
	msg := "INTEGRATION TEST NOT RUN: " + what
	if os.Getenv("CHARTPIN_REQUIRE_INTEGRATION") == "1" {
		t.Fatal(msg + "; CHARTPIN_REQUIRE_INTEGRATION=1 forbids skipping")
	}
	t.Skip(msg)
}
