package kubetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBinaryLookup(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KUBE_APISERVER", "")
	t.Setenv("CHARTPIN_CACHE", cache)
	if _, err := Binary(); err == nil || !strings.Contains(err.Error(), "hack/kube-apiserver/build.sh") {
		t.Errorf("empty cache: %v, want a hint to build.sh", err)
	}
	bin := filepath.Join(cache, "kube-apiserver-"+Version)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Binary(); err != nil || got != bin {
		t.Errorf("Binary() = %q, %v; want %q", got, err, bin)
	}
	t.Setenv("KUBE_APISERVER", filepath.Join(cache, "missing"))
	if _, err := Binary(); err == nil {
		t.Error("a missing KUBE_APISERVER was accepted")
	}
}

// The harness itself: the admin is system:masters, a plain token user is
// authenticated but authorized for nothing, and Apply creates objects.
func TestServer(t *testing.T) {
	srv := Start(t, User{Token: "nobody-token", Name: "nobody", Groups: []string{"system:authenticated"}})
	ctx := context.Background()
	admin := srv.Client(t, AdminToken)
	v, err := admin.Discovery().ServerVersion()
	if err != nil || v.GitVersion != Version {
		t.Fatalf("server version %v, %v; want %s", v, err, Version)
	}
	srv.Apply(t, []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: applied}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: applied}\ndata: {k: v}\n"))
	if _, err := admin.CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client(t, "nobody-token").CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("unprivileged user: %v, want forbidden", err)
	}
	if _, err := srv.Client(t, "wrong-token").CoreV1().ConfigMaps("applied").Get(ctx, "c", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("unknown token: %v, want Unauthorized", err)
	}
}
