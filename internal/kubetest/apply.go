package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// Apply creates every object of a multi-document YAML manifest (e.g. a
// rendered chart) as the admin, in order, and returns them.
func (s *Server) Apply(t testing.TB, manifest []byte) []*unstructured.Unstructured {
	t.Helper()
	cfg := s.Config(AdminToken)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decoding manifest: %v", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		got, err := ri.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s %s/%s: %v", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
		}
		out = append(out, got)
	}
	if len(out) == 0 {
		t.Fatal(fmt.Errorf("manifest has no objects"))
	}
	return out
}
