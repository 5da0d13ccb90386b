package reconcile

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chartpin/chartpin/internal/failure"
)

// A fleet's delays fill the window evenly, and each edge's is the same on
// every tick.
func TestSpreadDelayIsStableAndSpreadsAFleet(t *testing.T) {
	window := 10 * time.Minute
	buckets := make([]int, 10)
	for i := 0; i < 1000; i++ {
		key := fmt.Sprintf("edge-ns/6f1c2a4e-%04d-4b7e-9a53-0c8d2e1f%04d", i, i)
		d := SpreadDelay(key, window)
		if d < 0 || d >= window {
			t.Fatalf("delay %s outside [0, %s)", d, window)
		}
		if SpreadDelay(key, window) != d {
			t.Fatalf("delay of %s changed between calls", key)
		}
		buckets[d/time.Minute]++
	}
	for i, n := range buckets {
		if n < 60 || n > 140 { // 100 expected per minute
			t.Errorf("minute %d holds %d of 1000 edges; want about 100: %v", i, n, buckets)
		}
	}
	if SpreadDelay("x", 0) != 0 {
		t.Error("no window, yet a delay")
	}
}

// The tick waits its delay before the first request of any kind.
func TestSpreadWaitsBeforeAnyRequest(t *testing.T) {
	fx := newFixture(t)
	fx.install(fx.jm+"@"+fx.jmNew, fx.pm+"@"+fx.pmNew, fx.jm+"@"+fx.jmNew,
		[]string{fx.jmNew}, []string{fx.pmNew}, []string{fx.jmNew})
	var waited time.Duration
	var before int
	sleep := func(ctx context.Context, d time.Duration) error {
		waited, before = d, len(fx.client.Actions())+len(fx.reg.Requests())
		return nil
	}
	if _, err := fx.tick(fx.file, func(o *Options) { o.Spread, o.sleep = 90*time.Second, sleep }); err != nil {
		t.Fatal(err)
	}
	if waited != 90*time.Second || before != 0 {
		t.Errorf("waited %s with %d requests already sent; want 1m30s before any", waited, before)
	}
	// A deadline inside the wait ends the tick with nothing sent.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	fx.client.ClearActions()
	fx.reg.Reset()
	_, err := fx.reconciler(fx.resolver(), func(o *Options) { o.Spread = time.Hour }).Tick(ctx, fx.file)
	if err == nil || len(fx.client.Actions())+len(fx.reg.Requests()) != 0 {
		t.Errorf("err %v, %d requests; want a deadline error and none", err, len(fx.client.Actions())+len(fx.reg.Requests()))
	}
}

func TestServiceAccountKey(t *testing.T) {
	dir := t.TempDir()
	write := func(claims string) string {
		p := filepath.Join(dir, "token")
		tok := "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".c2ln"
		if err := os.WriteFile(p, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key, err := ServiceAccountKey(write(`{"kubernetes.io":{"namespace":"prod-ns","serviceaccount":{"name":"rel-example-reconcile","uid":"5d0c7a9e-1b1e-4c53-9d6e-2f4c8a0b1e11"}}}`))
	if err != nil || key != "prod-ns/5d0c7a9e-1b1e-4c53-9d6e-2f4c8a0b1e11" {
		t.Errorf("projected token: %q, %v", key, err)
	}
	key, err = ServiceAccountKey(write(`{"kubernetes.io/serviceaccount/namespace":"prod-ns","kubernetes.io/serviceaccount/service-account.uid":"u-1"}`))
	if err != nil || key != "prod-ns/u-1" {
		t.Errorf("legacy token: %q, %v", key, err)
	}
	if _, err := ServiceAccountKey(write(`{"sub":"x"}`)); err == nil || !strings.HasSuffix(err.Error(), "; pass JitterKey") {
		t.Errorf("a token without namespace and uid: %v; want an error naming the option JitterKey", err)
	}
	if _, err := ServiceAccountKey(filepath.Join(dir, "absent")); err == nil || !strings.HasSuffix(err.Error(), "outside a cluster pass JitterKey") {
		t.Errorf("no token file: %v; want an error naming the option JitterKey", err)
	}
}

// The deadline must leave room for the rollout wait and the spread window;
// the error names the options, which a command line renders as its flags.
func TestCheckBudget(t *testing.T) {
	if err := CheckBudget(20*time.Minute, 10*time.Minute, 5*time.Minute); err != nil {
		t.Errorf("20m for a 10m rollout and a 5m window: %v", err)
	}
	err := CheckBudget(15*time.Minute, 10*time.Minute, 5*time.Minute)
	if failure.Code(err) != 2 || !strings.HasPrefix(err.Error(), "Deadline 15m0s must exceed RolloutTimeout 10m0s plus Jitter 5m0s") {
		t.Errorf("a deadline with no slack: %v; want exit 2 naming Deadline, RolloutTimeout and Jitter", err)
	}
}
