// Package e2e holds one test of chartpin's whole release path on loopback —
// pin, pull request, publish, auto-upgrade, reconcile — with the real parts:
// Debian's docker-registry, git http-backend, the Helm SDK and a real
// kube-apiserver. Run it with `make e2e`.
package e2e
